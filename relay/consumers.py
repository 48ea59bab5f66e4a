"""WebSocket consumers (placeholder until the relay lands)."""

from channels.generic.websocket import AsyncJsonWebsocketConsumer


class AgentConsumer(AsyncJsonWebsocketConsumer):
    pass


def dashboard_application():
    return AgentConsumer.as_asgi()
