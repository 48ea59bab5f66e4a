"""WebSocket routes: agents authenticate with a bearer token, people with their session."""

from channels.auth import AuthMiddlewareStack
from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import path

from relay import consumers

websocket_urlpatterns = [
    path("ws/agent/", consumers.AgentConsumer.as_asgi()),
    # Session cookies ride along with any cross-site WebSocket, so the Origin check is
    # what stops another site from opening a dashboard socket in the user's name.
    path("ws/dashboard/", AllowedHostsOriginValidator(AuthMiddlewareStack(consumers.DashboardConsumer.as_asgi()))),
]
