"""The HTTP API under /api/v1/."""

from django.urls import path

urlpatterns: list = []
