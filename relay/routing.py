"""WebSocket routes."""

from django.urls import path

from relay import consumers

websocket_urlpatterns = [
    path("ws/agent/", consumers.AgentConsumer.as_asgi()),
    path("ws/dashboard/", consumers.dashboard_application()),
]
