"""Dashboard pages."""

from django.urls import path

from approvals import views

urlpatterns = [
    path("", views.queue, name="queue"),
]
