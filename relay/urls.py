"""HTTP routes the relay serves: the Claude Code hook endpoint, chat callbacks, metrics."""

from django.urls import path

urlpatterns: list = []
