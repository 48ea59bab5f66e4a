"""HTTP routes the relay serves: the Claude Code hook endpoint, chat callbacks, metrics."""

from django.urls import include, path

from relay import views

urlpatterns: list = [
    path("metrics", views.metrics, name="metrics"),
]

# Chat bridges: Slack interactivity and the optional Telegram webhook.
urlpatterns += [path("", include("relay.bridges.urls"))]
