"""A bare WebSocket echo: the baseline of the push-latency figures.

Mounted at `/ws/bench-echo/` by `gatehouse/asgi.py` only when `GATEHOUSE_BENCH=1`, so
it measures the same server process, event loop and Channels stack as the real
consumers, minus the database and the channel layer.
"""

from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import path


class BenchEchoConsumer(AsyncWebsocketConsumer):
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        await self.send(text_data=text_data, bytes_data=bytes_data)


websocket_urlpatterns = [path("ws/bench-echo/", BenchEchoConsumer.as_asgi())]
