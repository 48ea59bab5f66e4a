"""HTTP routes the relay serves: the Claude Code hook endpoint, chat callbacks, metrics."""

from django.urls import include, path

from relay import views
from relay.push import views as push_views

urlpatterns: list = [
    path("metrics", views.metrics, name="metrics"),
    path("service-worker.js", push_views.service_worker, name="service-worker"),
    path("notifications/", push_views.notifications, name="notifications"),
]

# Chat bridges: Slack interactivity and the optional Telegram webhook.
urlpatterns += [path("", include("relay.bridges.urls"))]
