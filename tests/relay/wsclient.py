"""WebSocket clients for the relay's end-to-end tests: an agent and a browser's dashboard."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import connection
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from relay.frames import check_frame
from tests.live import LiveServer

T = TypeVar("T")
TIMEOUT = 15.0


def agent_connect(srv: LiveServer, token: str | None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return connect(f"{srv.ws_url}/ws/agent/", additional_headers=headers, proxy=None, max_size=None)


def session_cookie(user: Any) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return str(client.cookies["sessionid"].value)


def dashboard_connect(srv: LiveServer, cookie: str | None, origin: str | None = None) -> Any:
    headers = {"Cookie": f"sessionid={cookie}"} if cookie else {}
    return connect(
        f"{srv.ws_url}/ws/dashboard/",
        additional_headers=headers,
        origin=Origin(origin or srv.url),
        proxy=None,
    )


async def send(ws: ClientConnection, frame: dict[str, Any]) -> None:
    await ws.send(json.dumps(frame))


# The frames of a `batch` not yet handed out by `receive`, per socket.
_UNBATCHED: weakref.WeakKeyDictionary[ClientConnection, list[dict[str, Any]]] = weakref.WeakKeyDictionary()


async def receive(ws: ClientConnection, timeout: float = TIMEOUT) -> dict[str, Any]:
    """The next frame, checked against the shape of its type (`relay.frames`).

    - A `batch` frame's frames are handed out one by one, as the page reads them.
    """
    waiting = _UNBATCHED.get(ws)
    if waiting:
        return waiting.pop(0)
    frame = json.loads(await asyncio.wait_for(ws.recv(), timeout))
    check_frame(frame)
    if frame["type"] == "batch":
        first, *rest = frame["frames"]
        _UNBATCHED[ws] = rest
        return dict(first)
    return dict(frame)


async def receive_until(
    ws: ClientConnection, predicate: Callable[[dict[str, Any]], bool], timeout: float = TIMEOUT
) -> dict[str, Any]:
    """The first frame matching `predicate`; earlier frames are skipped."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        frame = await receive(ws, max(deadline - loop.time(), 0.01))
        if predicate(frame):
            return frame
        print("skipped frame:", frame)  # shown when a test fails


def of_type(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f.get("type") == kind and all(f.get(k) == v for k, v in fields.items())


async def close_code(ws: ClientConnection, timeout: float = TIMEOUT) -> int | None:
    """Read until the server closes the socket; return its close code."""
    try:
        while True:
            await asyncio.wait_for(ws.recv(), timeout)
    except ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd else None


async def in_thread(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ORM work (services, selectors) from an async test, like a sync caller would."""

    def run() -> T:
        try:
            return func(*args, **kwargs)
        finally:
            connection.close()

    return await asyncio.to_thread(run)


def ask_call(command: str = "rm -rf build", **extra: Any) -> dict[str, Any]:
    """A call the engine answers 'ask' for (no rules, default mode)."""
    return {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": "s1", "cwd": "/tmp/proj", **extra}
