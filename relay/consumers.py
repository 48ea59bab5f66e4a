"""WebSocket consumers: agents submit calls and hear decisions; dashboards watch the queue.

Both follow the house rule for events: the channel layer is a doorbell, the database is
the truth. A consumer subscribes to its groups first, then reads the database, and
re-reads it whenever a doorbell rings (or on a slow timer, because the layer delivers
at most once), so a decision is never lost between a read and a subscribe.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.urls import reverse
from django.utils.html import format_html

from approvals import events, permissions, selectors, services, strict_json
from approvals.auth import AgentPrincipal, authenticate_token, bearer_token
from approvals.calls import CallInvalid, parse_call
from approvals.cards import render_card_as
from approvals.models import Agent, Decision, PermissionRequest, RequestState, Role
from policy.errors import classify_tool_error
from relay import drain, fanout
from relay import selectors as relay_selectors

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 * 1024
# Per connection: a steady 50 frames/s with bursts of 100 is far above what an agent
# streaming tool output needs, and far below what could starve the server.
FRAME_RATE = 50.0
FRAME_BURST = 100.0
# How often a socket with requests in flight re-reads the database, in case a doorbell
# was lost (Redis restart, a full channel).
RECHECK_SECONDS = 5.0
MAX_RESUME_IDS = 500
# One request may be waited on under a few refs (the same tool_use_id sent again); a cap
# keeps a replaying agent from growing the socket's memory.
MAX_REFS_PER_REQUEST = 16
# Error frames quote at most this much of what the agent sent: an echo must never let a
# client that does not read make the server hold copies of its large frames.
MAX_ECHOED_CHARS = 80

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_RATE_LIMITED = 4429
CLOSE_UNAVAILABLE = 4503
CLOSE_EVENTS_LOST = 1011  # what a socket whose own channel breaks gets from the server

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


def echoed(value: Any) -> str:
    """What an error frame may quote of client input: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= MAX_ECHOED_CHARS else text[:MAX_ECHOED_CHARS] + f"… ({len(text)} characters)"


def request_id_of(frame: dict[str, Any]) -> uuid.UUID:
    request_id = relay_selectors.parse_request_id(frame.get("id"))
    if request_id is None:
        raise FrameError("invalid_frame", f'{echoed(frame["type"])} needs "id": the request id (a UUID) from "pending"')
    return request_id


def decision_frame(ref: Any, request: PermissionRequest, decision: Decision) -> dict[str, Any]:
    return {
        "type": "decision",
        "ref": ref,
        "id": str(request.pk),
        "status": request.state,
        "decision": selectors.decision_payload(decision),
    }


DECISION_KEYS = frozenset(
    ("id", "behavior", "message", "updated_input", "reason", "decided_by", "surface", "decided_at")
)
FINISHED_STATES = frozenset(str(s.value) for s in (RequestState.DECIDED, RequestState.CANCELLED, RequestState.EXPIRED))


def pushed_decision(event: dict[str, Any]) -> dict[str, Any] | None:
    """The decision a `request.decided`-style event carries, if whole; else None (read the row)."""
    decision = event.get("decision")
    if not isinstance(decision, dict) or set(decision) != DECISION_KEYS:
        return None
    if event.get("state") not in FINISHED_STATES or decision["behavior"] not in ("allow", "deny"):
        return None
    if decision["id"] is None or decision["id"] != event.get("decision_id"):
        return None
    return decision


class GatehouseConsumer(AsyncWebsocketConsumer):
    """What both consumers share: strict frames, a rate limit, and tolerant dispatch."""

    frame_handlers: dict[str, str] = {}

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
        if getattr(self, "drained", False):
            # Closed by the drain: work still finishing here (a submit that just
            # committed) reaches the client on its new socket, through resume or replay.
            return
        await self.send(text_data=json.dumps(content, default=str))

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


# --- agents -------------------------------------------------------------------------------


def _validated_call(request: Any) -> dict[str, Any]:
    if not isinstance(request, dict):
        raise FrameError("invalid_frame", '"permission_request" needs "request": an object with "tool_name"')
    try:
        return parse_call(request)
    except CallInvalid as exc:
        raise FrameError("invalid_request", f"request: {exc}") from None


# What `policy.errors.classify_tool_error` produces agent-side: "ENOENT"-style codes and
# class names. Anything else could carry a path or a secret into a metric label.
_ERROR_CLASS = re.compile(r"[A-Za-z][A-Za-z0-9_.:]{0,63}")


def _error_class(value: Any) -> str:
    if isinstance(value, str) and _ERROR_CLASS.fullmatch(value):
        return value
    return classify_tool_error(None)  # "UnknownError"


@db
def _authenticate(token: str) -> tuple[Agent | None, int]:
    principal = authenticate_token(token)
    if isinstance(principal, AgentPrincipal):
        return principal.agent, 0
    if principal is not None or relay_selectors.token_is_revoked(token):
        # A person's token, or a revoked one: we know who it is, and the answer is no.
        return None, CLOSE_FORBIDDEN
    return None, CLOSE_UNAUTHENTICATED


def _finished(request_ids: list[uuid.UUID]) -> list[tuple[PermissionRequest, Decision]]:
    requests = PermissionRequest.objects.filter(pk__in=request_ids).exclude(state=RequestState.PENDING)
    decisions = {d.request_id: d for d in Decision.objects.filter(request_id__in=request_ids)}
    return [(r, decisions[r.pk]) for r in requests if r.pk in decisions]


class SocketCount:
    """Open agent sockets per agent in this process, so one token cannot hold unbounded buffers."""

    def __init__(self) -> None:
        self.open_sockets: dict[int, int] = {}

    def open(self, agent_id: int) -> bool:
        count = self.open_sockets.get(agent_id, 0)
        if count >= settings.GATEHOUSE_MAX_AGENT_SOCKETS:
            return False
        self.open_sockets[agent_id] = count + 1
        return True

    def close(self, agent_id: int) -> None:
        count = self.open_sockets.get(agent_id, 0) - 1
        if count > 0:
            self.open_sockets[agent_id] = count
        else:
            self.open_sockets.pop(agent_id, None)


SOCKETS_PER_AGENT = SocketCount()


class AgentConsumer(GatehouseConsumer):
    """`/ws/agent/`: many requests in flight per socket, each answered exactly once."""

    frame_handlers = {
        "permission_request": "on_permission_request",
        "cancel": "on_cancel",
        "progress": "on_progress",
        "tool_result": "on_tool_result",
        "resume": "on_resume",
    }

    async def connect(self) -> None:
        self.bucket = TokenBucket()
        self.joined: list[str] = []
        # request id -> the client's ref, for every request this socket still owes an answer.
        # Every ref the agent used for one request: the same tool_use_id sent twice maps to
        # one request, and each ref still gets its answer.
        self.refs: dict[uuid.UUID, list[Any]] = {}
        self.team_of: dict[uuid.UUID, int] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.closing = False
        self.agent: Agent | None = None
        # Accept first: a close code reaches the client only on an open socket (closing
        # during the handshake becomes a bare HTTP 403).
        await self.accept()
        headers = dict(self.scope.get("headers", []))
        token = bearer_token(headers.get(b"authorization", b"").decode("latin-1"))
        agent, code = await _authenticate(token) if token else (None, CLOSE_UNAUTHENTICATED)
        if agent is None:
            self.closing = True
            await self.send_error(
                "unauthenticated" if code == CLOSE_UNAUTHENTICATED else "forbidden",
                "send 'Authorization: Bearer <agent token>'"
                if code == CLOSE_UNAUTHENTICATED
                else "this token is revoked or is not an agent's token",
            )
            await self.close(code)
            return
        if not SOCKETS_PER_AGENT.open(agent.pk):
            self.closing = True
            limit = settings.GATEHOUSE_MAX_AGENT_SOCKETS
            await self.send_error("too_many_sockets", f"this agent already has {limit} sockets open on this server")
            await self.close(CLOSE_RATE_LIMITED)
            return
        self.agent = agent
        drain.register(self)
        if drain.is_draining():  # opened while this process stops: send it on at once
            await self.drain()
            return
        try:
            await self.group_join(events.agent_group(agent.pk))
        except Exception:
            # No doorbell (the channel layer is down): decisions still arrive through
            # the periodic database re-check, only later.
            log.warning("agent %s connected without a doorbell", agent.pk, exc_info=True)
        self.spawn(self.recheck_forever())

    async def disconnect(self, code: int) -> None:
        drain.unregister(self)
        if getattr(self, "agent", None) is not None:
            SOCKETS_PER_AGENT.close(self.agent.pk)  # type: ignore[union-attr]
        for task in list(getattr(self, "tasks", ())):
            task.cancel()
        await self.leave_groups()

    def spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.agent is None:
            return
        await super().receive(text_data, bytes_data)

    # -- frames in

    async def on_permission_request(self, frame: dict[str, Any]) -> None:
        ref = frame.get("ref")
        if not isinstance(ref, str | int) or isinstance(ref, bool) or len(str(ref)) > 200:
            raise FrameError("invalid_frame", '"permission_request" needs "ref": a string of up to 200 characters')
        call = _validated_call(frame.get("request"))
        # Submitting may wait on PreToolUse webhooks; do it beside the socket so other
        # frames (cancels, progress) and decisions keep flowing meanwhile.
        self.spawn(self.submit(ref, call))

    async def submit(self, ref: Any, call: dict[str, Any]) -> None:
        assert self.agent is not None
        try:
            result = await db(services.request_submit)(agent=self.agent, call=call)
        except services.AuditUnavailable:
            await self.send_json(
                {
                    "type": "decision",
                    "ref": ref,
                    "id": None,
                    "status": "decided",
                    "decision": {
                        "behavior": "deny",
                        "message": services.AUDIT_UNAVAILABLE,
                        "updated_input": None,
                        "reason": {"type": "other", "detail": "audit unavailable"},
                        "decided_by": "gatehouse",
                        "surface": "engine",
                    },
                }
            )
            return
        except services.ServiceError as exc:
            await self.send_error("invalid_request", str(exc), ref=ref)
            return
        except Exception:
            log.exception("submit failed for agent %s", self.agent.pk)
            await self.send_error("internal", "the server could not record this request; send it again", ref=ref)
            return
        request = result.request
        self.team_of[request.pk] = request.team_id
        if result.decision is not None:
            await self.send_json(decision_frame(ref, request, result.decision))
            return
        # Register before any await: from here on the doorbell handler can deliver.
        self.add_ref(request.pk, ref)
        await self.send_json({"type": "pending", "ref": ref, "id": str(request.pk)})
        # The decision may have committed before we registered (a very fast approver).
        await self.deliver([request.pk])

    async def on_cancel(self, frame: dict[str, Any]) -> None:
        request_id = request_id_of(frame)
        request = await self.own_request(request_id)
        given = frame.get("reason")
        reason = given if isinstance(given, str) and given else "withdrawn by the agent"
        self.refs.setdefault(request_id, [frame.get("ref")])
        await db(services.request_cancel)(request=request, reason=reason[:200])
        # Cancelled now or decided just before: either way the agent hears the outcome.
        await self.deliver([request_id])

    async def on_progress(self, frame: dict[str, Any]) -> None:
        request_id = request_id_of(frame)
        await self.request_in_play(request_id, "progress")
        team_id = self.team_of[request_id]
        event = {"type": "request.progress", "request_id": str(request_id), "data": frame.get("data")}
        for group in (events.team_group(team_id), events.ALL_TEAMS_GROUP):
            await self.channel_layer.group_send(group, event)

    async def on_tool_result(self, frame: dict[str, Any]) -> None:
        request_id = request_id_of(frame)
        if not isinstance(frame.get("ok"), bool):
            raise FrameError("invalid_frame", '"tool_result" needs "ok": true or false')
        request = await self.request_in_play(request_id, "tool_result")
        error = frame.get("error", "")
        if not frame["ok"] and not isinstance(error, str):
            error = json.dumps(error, default=str)
        await db(services.request_record_result)(
            request=request, ok=frame["ok"], output=frame.get("output"), error=error
        )
        if not frame["ok"]:
            from relay import observability

            observability.record_tool_error(_error_class(frame.get("error_class")))

    async def on_resume(self, frame: dict[str, Any]) -> None:
        """After a reconnect: re-attach the ids the client still waits for."""
        ids = frame.get("ids")
        if not isinstance(ids, list) or len(ids) > MAX_RESUME_IDS:
            raise FrameError("invalid_frame", f'"resume" needs "ids": a list of up to {MAX_RESUME_IDS} request ids')
        wanted: dict[uuid.UUID, Any] = {}
        for item in ids:
            raw, ref = (item.get("id"), item.get("ref")) if isinstance(item, dict) else (item, None)
            request_id = relay_selectors.parse_request_id(raw)
            if request_id is None:
                await self.send_error("invalid_frame", f"{echoed(raw)} is not a request id")
                continue
            wanted[request_id] = ref
        assert self.agent is not None
        agent_id = self.agent.pk
        found = await db(lambda: list(PermissionRequest.objects.filter(pk__in=list(wanted), agent_id=agent_id)))()
        known = {r.pk for r in found}
        for request_id in wanted.keys() - known:
            await self.send_error(
                "not_found", f"request {request_id} does not exist or is not yours", id=str(request_id)
            )
        for request in found:
            self.team_of[request.pk] = request.team_id
            self.add_ref(request.pk, wanted[request.pk])
            if request.state == RequestState.PENDING:
                await self.send_json({"type": "pending", "ref": wanted[request.pk], "id": str(request.pk)})
        await self.deliver(list(known))

    def add_ref(self, request_id: uuid.UUID, ref: Any) -> None:
        refs = self.refs.setdefault(request_id, [])
        if ref not in refs and len(refs) < MAX_REFS_PER_REQUEST:
            refs.append(ref)

    async def request_in_play(self, request_id: uuid.UUID, frame_type: str) -> PermissionRequest:
        """The agent's request, if a call that may run or is running: refuse frames about denied ones.

        A `tool_result` or `progress` for a request a person denied, or that expired, would
        show on its page as if the call ran; one that was already run (a result is stored)
        takes no more progress.
        """
        assert self.agent is not None
        request = await db(relay_selectors.agent_request_with_decision)(self.agent.pk, request_id)
        if request is None:
            raise FrameError("not_found", f"request {request_id} does not exist or is not yours")
        self.team_of[request_id] = request.team_id
        decision = getattr(request, "decision", None) if request.state == RequestState.DECIDED else None
        allowed = decision is not None and decision.behavior == "allow"
        # Withdrawn by the agent ("answered locally"): it may have run on the agent's own say.
        may_run = allowed or request.state == RequestState.CANCELLED
        if frame_type == "tool_result" and not may_run:
            raise FrameError("request_not_allowed", f"request {request_id} was not allowed; it has no tool result")
        in_play = request.state == RequestState.PENDING or (allowed and request.result is None)
        if frame_type == "progress" and not in_play:
            raise FrameError("request_finished", f"request {request_id} is finished; it takes no more progress")
        return request

    async def own_request(self, request_id: uuid.UUID) -> PermissionRequest:
        assert self.agent is not None
        request = await db(relay_selectors.agent_request)(self.agent.pk, request_id)
        if request is None:
            raise FrameError("not_found", f"request {request_id} does not exist or is not yours")
        self.team_of[request_id] = request.team_id
        return request

    # -- decisions out

    async def deliver(self, request_ids: list[uuid.UUID]) -> None:
        """Send the outcome of each finished request this socket still owes, exactly once."""
        if not request_ids:
            return
        for request, decision in await db(_finished)(request_ids):
            # Pop only after reading: two deliveries racing for one id send it once, and
            # a read that saw "pending" never swallows the doorbell that follows it.
            if request.pk not in self.refs:
                continue
            for ref in self.refs.pop(request.pk):
                await self.send_json(decision_frame(ref, request, decision))

    async def recheck_forever(self) -> None:
        while True:
            await asyncio.sleep(RECHECK_SECONDS)
            try:
                await self.deliver(list(self.refs))
            except Exception:  # the loop must outlive a blip: it is what catches lost doorbells
                log.warning("recheck failed", exc_info=True)

    async def request_finished(self, event: dict[str, Any]) -> None:
        request_id = relay_selectors.parse_request_id(event.get("request_id"))
        if request_id is None or request_id not in self.refs:
            return
        decision = pushed_decision(event)
        if decision is None:
            # An older server process, or a rewritten input too large to push: read it.
            await self.deliver([request_id])
            return
        # The event was sent after the audit row committed and carries that row: no
        # database read (and no worker thread) on the way to the agent.
        for ref in self.refs.pop(request_id):
            await self.send_json(
                {"type": "decision", "ref": ref, "id": str(request_id), "status": event["state"], "decision": decision}
            )

    request_decided = request_finished
    request_cancelled = request_finished
    request_expired = request_finished


# --- dashboards ---------------------------------------------------------------------------


# What one card may weigh in a snapshot: a 280 KB command made the snapshot frame too
# large for clients with a 1 MiB frame limit, breaking it for the whole team.
MAX_SNAPSHOT_CARD_BYTES = 64 * 1024


def _card_within_limit(request: PermissionRequest, html: str) -> str:
    """The card, or a short stand-in that sends the person to the request's own page."""
    if len(html.encode()) <= MAX_SNAPSHOT_CARD_BYTES:
        return html
    return format_html(
        '<article class="card card-pending" id="req-{id}" data-id="{id}" data-state="pending">'
        '<p>This call is too large to show in the queue ({size} KB). <a href="{url}">Open it</a> '
        "to read it in full and decide.</p></article>",
        id=request.pk,
        size=len(html.encode()) // 1024,
        url=reverse("request-detail", args=[request.pk]),
    )


def _snapshot(user: Any) -> list[dict[str, str]]:
    # One query for the teams the user decides in, not one per card.
    approver_of = permissions.team_ids_for(user, role=Role.APPROVER)
    return [
        {
            "id": str(r.pk),
            "html": _card_within_limit(
                r, render_card_as(r, can_decide=approver_of is None or r.team_id in approver_of)
            ),
        }
        for r in selectors.pending_requests(user)
    ]


def _visible_team(request_id: uuid.UUID, user: Any) -> int | None:
    request = PermissionRequest.objects.filter(pk=request_id).only("team_id").first()
    if request is None or not permissions.can_see(user, request.team_id):
        return None
    return request.team_id


async def _forward(receive: Callable[[], Awaitable[dict[str, Any]]], inbox: asyncio.Queue[dict[str, Any]]) -> None:
    while True:
        message = await receive()
        inbox.put_nowait(message)
        if message.get("type") == "websocket.disconnect":
            return


class DashboardConsumer(GatehouseConsumer):
    """`/ws/dashboard/`: subscribe, get a snapshot, then live pushes of the user's teams."""

    frame_handlers = {"subscribe": "on_subscribe", "open": "on_open", "close": "on_close"}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # The teams' events come through the process's one subscription per team
        # (relay.fanout.GROUPS) into this inbox, and the browser's frames are forwarded
        # into it too: one queue handles both in arrival order, so a snapshot and the
        # events around it never overtake each other.
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.team_groups: list[str] = []
        forward = asyncio.ensure_future(_forward(receive, self.inbox))
        try:
            await super().__call__(scope, self.inbox.get, send)
        finally:
            forward.cancel()
            await self.leave_team_groups()

    async def connect(self) -> None:
        self.bucket = TokenBucket()
        self.joined: list[str] = []
        self.closing = False
        self.subscribed = False
        self.user = self.scope.get("user")
        await self.accept()
        if self.user is None or not self.user.is_authenticated:
            self.closing = True
            await self.send_error("unauthenticated", "log in at /accounts/login/ first")
            await self.close(CLOSE_UNAUTHENTICATED)
            return
        try:
            await self.group_join(events.user_group(self.user.pk))
        except Exception:
            # Without the channel layer a dashboard would silently stop updating; say so
            # and let the page reconnect later instead.
            log.warning("dashboard of user %s refused: channel layer unavailable", self.user.pk, exc_info=True)
            self.closing = True
            await self.send_error("unavailable", "live updates are unavailable right now; reconnect in a moment")
            await self.close(CLOSE_UNAVAILABLE)
            return
        drain.register(self)
        if drain.is_draining():
            await self.drain()

    async def disconnect(self, code: int) -> None:
        drain.unregister(self)
        await self.leave_team_groups()
        await self.leave_groups()

    async def leave_team_groups(self) -> None:
        groups, self.team_groups = self.team_groups, []
        for group in groups:
            await fanout.GROUPS.leave(group, self.inbox)

    async def on_subscribe(self, frame: dict[str, Any]) -> None:
        # Join first, snapshot second: an event between the two shows up twice at
        # worst (the client replaces by id), never zero times.
        if not self.subscribed:
            team_ids = await db(permissions.team_ids_for)(self.user)
            groups = [events.ALL_TEAMS_GROUP] if team_ids is None else [events.team_group(t) for t in team_ids]
            for group in groups:
                await fanout.GROUPS.join(group, self.inbox)
                self.team_groups.append(group)
            self.subscribed = True
        requests = await db(_snapshot)(self.user)
        await self.send_json({"type": "snapshot", "requests": requests})

    async def on_open(self, frame: dict[str, Any]) -> None:
        await self._announce_review(frame, "request.claimed")

    async def on_close(self, frame: dict[str, Any]) -> None:
        await self._announce_review(frame, "request.released")

    async def _announce_review(self, frame: dict[str, Any], event_type: str) -> None:
        request_id = request_id_of(frame)
        team_id = await db(_visible_team)(request_id, self.user)
        if team_id is None:
            raise FrameError("not_found", f"request {request_id} does not exist or is not in your teams")
        event = {
            "type": event_type,
            "request_id": str(request_id),
            "by": self.user.get_username(),
            "sender": self.channel_name,
        }
        for group in (events.team_group(team_id), events.ALL_TEAMS_GROUP):
            await self.channel_layer.group_send(group, event)

    # -- events

    # Cards are rendered once per process and event (relay.fanout) and handed to every
    # socket in the variant its user's role allows, read from the database at event time.

    async def request_created(self, event: dict[str, Any]) -> None:
        card = await fanout.CARDS.card(event)
        html = card.html_for(self.user) if card is not None else None
        if card is not None and html is not None:
            await self.send_json({"type": "request.created", "id": card.id, "html": html})

    async def request_finished(self, event: dict[str, Any]) -> None:
        card = await fanout.CARDS.card(event)
        html = card.html_for(self.user) if card is not None else None
        if card is not None and html is not None:
            await self.send_json(
                {
                    "type": event["type"],
                    "id": card.id,
                    "html": html,
                    "behavior": event.get("behavior"),
                    "decided_by": event.get("decided_by"),
                    "surface": event.get("surface"),
                }
            )

    request_decided = request_finished
    request_cancelled = request_finished
    request_expired = request_finished

    async def request_claimed(self, event: dict[str, Any]) -> None:
        if event.get("sender") != self.channel_name:
            await self.send_json({"type": event["type"], "id": event.get("request_id"), "by": event.get("by")})

    request_released = request_claimed

    async def request_progress(self, event: dict[str, Any]) -> None:
        await self.send_json({"type": "request.progress", "id": event.get("request_id"), "data": event.get("data")})

    async def fanout_lost(self, event: dict[str, Any]) -> None:
        # The process lost its subscription to one of this user's teams: rather than
        # silently stop updating, close; the page reconnects, subscribes and refetches.
        log.warning("dashboard of user %s closed: lost the events of %s", self.user.pk, event.get("group"))
        self.closing = True
        await self.close(CLOSE_EVENTS_LOST)

    async def session_ended(self, event: dict[str, Any]) -> None:
        self.closing = True
        await self.send_error(
            "session_ended", "your session ended (logged out, password changed or account deactivated); log in again"
        )
        await self.close(CLOSE_UNAUTHENTICATED)
