"""`/healthz` and `/readyz`: probes for the proxy and the process manager, without a login.

They answer in front of Django (an ASGI wrapper, like the body limit) on purpose: a
proxy probes each process on its loopback address over plain HTTP, which host
validation (`ALLOWED_HOSTS`) and production's HTTPS redirect would both refuse, and a
probe every second must not cost a session lookup.

- `/healthz`: the process's event loop answers (liveness). Always 200.
- `/readyz`: the database and, when configured, Redis answer within a few seconds, and
  the process is not draining; else 503 with what failed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connection

from relay import drain

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 3.0
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _database_answers() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


async def _check(name: str, probe: Callable[[], Awaitable[Any]]) -> str:
    try:
        await asyncio.wait_for(probe(), PROBE_TIMEOUT)
    except Exception as exc:  # any failure means "not ready", and says which part failed
        log.warning("readiness: %s unreachable: %s", name, exc)
        return f"unreachable: {type(exc).__name__}"
    return "ok"


async def _redis_answers() -> None:
    client = aioredis.Redis.from_url(settings.REDIS_URL, socket_timeout=PROBE_TIMEOUT)
    try:
        await client.ping()
    finally:
        await client.aclose()  # type: ignore[attr-defined]  # redis 5+ has it; the stubs predate it


async def readiness() -> tuple[int, dict[str, str]]:
    """The status code and the per-part report `/readyz` answers with."""
    report = {"database": await _check("database", database_sync_to_async(_database_answers))}
    report["redis"] = await _check("redis", _redis_answers) if settings.REDIS_URL else "not configured"
    report["process"] = "draining" if drain.is_draining() else "serving"
    ready = report["database"] == "ok" and report["redis"] in ("ok", "not configured") and not drain.is_draining()
    return (200 if ready else 503), report


async def _respond(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


class HealthProbes:
    """Answer `GET /healthz` and `GET /readyz`; hand everything else to the application."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path == "/healthz":
            await _respond(send, 200, {"status": "ok"})
        elif path == "/readyz":
            status, report = await readiness()
            await _respond(send, status, {"status": "ready" if status == 200 else "unavailable", **report})
        else:
            await self.app(scope, receive, send)
