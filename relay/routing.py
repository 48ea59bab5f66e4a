"""WebSocket routes: agents authenticate with a bearer token, people with their session."""

from channels.auth import AuthMiddlewareStack
from django.urls import path

from relay import consumers
from relay.origins import DashboardOriginValidator

websocket_urlpatterns = [
    path("ws/agent/", consumers.AgentConsumer.as_asgi()),
    # Session cookies ride along with any cross-site WebSocket, so the Origin check is
    # what stops another site (or another port) from opening a dashboard socket in the
    # user's name: full origins are compared, never the host alone.
    path("ws/dashboard/", DashboardOriginValidator(AuthMiddlewareStack(consumers.DashboardConsumer.as_asgi()))),
]
