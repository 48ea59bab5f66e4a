"""The HTTP API under /api/v1/."""

from django.urls import path

from approvals.api.health import HealthCheckApi

urlpatterns: list = [
    path("health", HealthCheckApi.as_view(), name="api-health"),
]
