"""What both sockets share: frame parsing and limits, the dispatch loop, close codes."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from approvals import strict_json
from relay import drain, fanout
from relay import selectors as relay_selectors

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 * 1024
# Per connection: a steady 50 frames/s with bursts of 100 is far above what an agent
# streaming tool output needs, and far below what could starve the server.
FRAME_RATE = 50.0
FRAME_BURST = 100.0
# Error frames quote at most this much of what the agent sent: an echo must never let a
# client that does not read make the server hold copies of its large frames.
MAX_ECHOED_CHARS = 80

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_RATE_LIMITED = 4429
CLOSE_UNAVAILABLE = 4503
# The process lost its subscription to the socket's doorbells: reconnect, then resume or
# refetch. (1011, what a socket whose own channel breaks gets, is Daphne's alone to send:
# a close code from the application must be 1000 or 3000-4999.)
CLOSE_EVENTS_LOST = 4011

# Keys an agent may send in `request`, the same as `POST /api/v1/permission-requests`.
# `pre_tool_use_hooks` are the outputs of the agent harness's own PreToolUse hooks: the
# harness holding the token is trusted as much as its hook configuration, and a hook
# allow still loses to every deny and ask rule (SPEC §4 step 4).


def db(func: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """Run ORM work in a worker thread, closing stale connections around it.

    Not thread-sensitive: a slow decision (a PreToolUse webhook) on one socket must
    not queue every other socket of the process behind it.
    """
    return database_sync_to_async(func, thread_sensitive=False)


class FrameError(Exception):
    """A frame we refuse, with a code and a message the client can act on."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class TokenBucket:
    rate: float = FRAME_RATE
    burst: float = FRAME_BURST
    tokens: float = FRAME_BURST
    updated: float = field(default_factory=time.monotonic)

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


def parse_frame(text: str | None, binary: bytes | None) -> dict[str, Any]:
    """Decode one client frame or raise `FrameError`."""
    if text is None:
        raise FrameError("invalid_frame", "send JSON text frames; binary frames are not supported")
    if len(text.encode()) > MAX_FRAME_BYTES:
        raise FrameError("frame_too_large", f"frames are limited to {MAX_FRAME_BYTES} bytes")
    try:
        frame = strict_json.loads(text)
    except strict_json.LoneSurrogateError as exc:
        raise FrameError("invalid_json", str(exc)) from None
    except ValueError:
        raise FrameError("invalid_json", "the frame is not valid JSON") from None
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise FrameError("invalid_frame", 'a frame must be a JSON object with a string "type"')
    return frame


def encode_frame(content: dict[str, Any]) -> str:
    """The JSON text of one frame the server sends."""
    return json.dumps(content, default=str)


def echoed(value: Any) -> str:
    """What an error frame may quote of client input: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= MAX_ECHOED_CHARS else text[:MAX_ECHOED_CHARS] + f"… ({len(text)} characters)"


def request_id_of(frame: dict[str, Any]) -> uuid.UUID:
    request_id = relay_selectors.parse_request_id(frame.get("id"))
    if request_id is None:
        raise FrameError("invalid_frame", f'{echoed(frame["type"])} needs "id": the request id (a UUID) from "pending"')
    return request_id


async def _forward(receive: Callable[[], Awaitable[dict[str, Any]]], inbox: fanout.Inbox) -> None:
    while True:
        message = await receive()
        inbox.put_nowait(message)
        if message.get("type") == "websocket.disconnect":
            return


class GatehouseConsumer(AsyncWebsocketConsumer):
    """What both consumers share: strict frames, a rate limit, tolerant dispatch, one inbox."""

    frame_handlers: dict[str, str] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # The doorbells of the bus's groups (the teams', the agents'; approvals.teambus)
        # come through the process's one subscription (relay.fanout.GROUPS) into this
        # inbox, and the client's frames are forwarded into it too: one queue handles
        # both in arrival order, so a snapshot and the events around it never overtake
        # each other.
        self.inbox = fanout.Inbox()
        self.bus_groups: list[str] = []
        forward = asyncio.ensure_future(_forward(receive, self.inbox))
        try:
            await super().__call__(scope, self.inbox.get, send)
        finally:
            forward.cancel()
            await self.leave_bus_groups()

    async def bus_join(self, group: str, *, cards: bool = False) -> None:
        """Hear a bus group's doorbells (`approvals.teambus.on_bus`) from when this returns.

        - `cards`: this socket shows the events' cards (`fanout.LocalGroups.join`).
        """
        await fanout.GROUPS.join(group, self.inbox, cards=cards)
        self.bus_groups.append(group)

    async def leave_bus_groups(self) -> None:
        groups, self.bus_groups = self.bus_groups, []
        for group in groups:
            await fanout.GROUPS.leave(group, self.inbox)

    async def fanout_lost(self, event: dict[str, Any]) -> None:
        # The process lost its subscription to one of this socket's groups, or this socket
        # fell `behind` on them (relay.fanout.MAX_BACKLOG): rather than silently stop
        # hearing, close; the client reconnects, and resumes or refetches.
        why = f"{event['behind']} events behind" if "behind" in event else "the subscription broke"
        log.warning("%s closed: lost the events of %s (%s)", type(self).__name__, event.get("group"), why)
        self.closing = True
        await self.close(CLOSE_EVENTS_LOST)

    async def dispatch(self, message: dict[str, Any]) -> None:
        # An event type this consumer has no use for (a newer server process, another
        # surface's event) is ignored; Channels would otherwise kill the socket.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            log.debug("%s ignores event %s", type(self).__name__, message.get("type"))
            return
        # Channels' own dispatch first runs close_old_connections through sync_to_async:
        # a hop onto the one thread Django's sync views share, for every frame and every
        # doorbell of every socket (20 dashboards = 20 hops in a queue per event). Our
        # handlers touch the database only through `db()`, which closes stale connections
        # around its own work in its own thread, so the hop guards nothing here.
        if str(message.get("type", "")).startswith("websocket."):
            await handler(message)
            return
        try:
            await handler(message)
        except Exception:
            # A doorbell we could not act on (the database blinked) must not kill the
            # socket: the periodic re-check or the client's next resume catches up.
            log.exception("%s failed handling event %s", type(self).__name__, message.get("type"))

    async def send_json(self, content: dict[str, Any]) -> None:
        await self.send_text(encode_frame(content))

    async def send_text(self, frame: str) -> None:
        """Send one frame already encoded as JSON."""
        if getattr(self, "drained", False):
            # Closed by the drain: work still finishing here (a submit that just
            # committed) reaches the client on its new socket, through resume or replay.
            return
        await self.send(text_data=frame)

    async def send_error(self, code: str, message: str, **extra: Any) -> None:
        await self.send_json({"type": "error", "code": code, "message": message, **extra})

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if getattr(self, "closing", False):
            return
        if not self.bucket.take():
            # Close, but keep every pending request: the agent reconnects and resumes.
            self.closing = True
            await self.send_error("rate_limited", f"more than {FRAME_RATE:.0f} frames/s; reconnect and slow down")
            await self.close(CLOSE_RATE_LIMITED)
            return
        frame: dict[str, Any] = {}
        try:
            frame = parse_frame(text_data, bytes_data)
            handler = self.frame_handlers.get(frame["type"])
            if handler is None:
                known = ", ".join(sorted(self.frame_handlers))
                raise FrameError("unknown_type", f"unknown frame type {echoed(frame['type'])}; use one of {known}")
            await getattr(self, handler)(frame)
        except FrameError as exc:
            await self.send_error(exc.code, exc.message, **self._ref_of(frame))
        except Exception:
            # Any fault handling one frame answers that frame with an error and keeps
            # the socket: the agent's other requests in flight must not be dropped.
            log.exception("%s failed on a %s frame", type(self).__name__, frame.get("type"))
            await self.send_error(
                "internal", "the server could not handle this frame; try again", **self._ref_of(frame)
            )

    @staticmethod
    def _ref_of(frame: dict[str, Any]) -> dict[str, Any]:
        return {"ref": frame["ref"]} if isinstance(frame.get("ref"), str | int) else {}

    async def drain(self) -> None:
        """The process is stopping: tell the client to reconnect and resume, then close."""
        self.closing = True
        await self.send_json(drain.RECONNECT_FRAME)
        await self.close(drain.CLOSE_SERVICE_RESTART)
        self.drained = True

    async def group_join(self, group: str) -> None:
        await self.channel_layer.group_add(group, self.channel_name)
        self.joined.append(group)

    async def leave_groups(self) -> None:
        for group in getattr(self, "joined", []):
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception:  # the group membership expires on its own
                log.warning("could not leave %s", group, exc_info=True)
