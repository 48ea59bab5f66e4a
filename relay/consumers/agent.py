"""The agent's socket: it submits calls, reports progress and results, and hears decisions."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from collections import OrderedDict
from collections.abc import Awaitable
from typing import Any

from django.conf import settings

from approvals import events, selectors, services
from approvals.auth import AgentPrincipal, authenticate_token, bearer_token
from approvals.calls import CallInvalid, parse_call
from approvals.models import Agent, Decision, PermissionRequest, RequestState
from policy.errors import classify_tool_error
from relay import drain
from relay import selectors as relay_selectors
from relay.consumers.base import (
    CLOSE_FORBIDDEN,
    CLOSE_RATE_LIMITED,
    CLOSE_UNAUTHENTICATED,
    FrameError,
    GatehouseConsumer,
    TokenBucket,
    db,
    echoed,
    request_id_of,
)

log = logging.getLogger(__name__)

# How often a socket with requests in flight re-reads the database, in case a doorbell
# was lost (Redis restart, a full channel).
RECHECK_SECONDS = 5.0
MAX_RESUME_IDS = 500
# One request may be waited on under a few refs (the same tool_use_id sent again); a cap
# keeps a replaying agent from growing the socket's memory.
MAX_REFS_PER_REQUEST = 16
# Finished doorbells for requests this socket owes nothing yet, kept for a submit still on
# its way back from its worker thread (a racer can decide an ask that fast); the oldest go
# first. The agent's other sockets' requests end up here too, so it is bounded.
MAX_EARLY_DOORBELLS = 32


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
    """The finished requests among these, each with its outcome row, in one read."""
    requests = PermissionRequest.objects.filter(pk__in=request_ids, decision__isnull=False)
    requests = requests.exclude(state=RequestState.PENDING).select_related("decision")
    return [(request, request.decision) for request in requests if request.decision is not None]


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

    # No channel of its own on the channel layer (an alias that is not configured: Channels
    # then gives the consumer none): the agent's doorbells come through the bus
    # (`approvals.teambus`), so the socket holds no channel-layer receive a Redis restart
    # could break, and costs Redis nothing while idle.
    channel_layer_alias = "none: agent sockets hear the bus"

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
        self.early: OrderedDict[uuid.UUID, dict[str, Any]] = OrderedDict()
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
            await self.bus_join(events.agent_group(agent.pk))
        except Exception:
            # No doorbell (Redis is down): decisions still arrive through
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
        await self.owed(request.pk, ref)

    async def owed(self, request_id: uuid.UUID, ref: Any) -> None:
        """Register a pending request this socket owes an answer, and say it is pending."""
        # Register before any await: from here on the doorbell handler can deliver.
        self.add_ref(request_id, ref)
        await self.send_json({"type": "pending", "ref": ref, "id": str(request_id)})
        # Its decision may have been rung before we registered (a very fast racer); a
        # doorbell the bus lost is caught by the periodic re-check, as for any request.
        early = self.early.pop(request_id, None)
        if early is not None:
            await self.request_finished(early)

    async def on_cancel(self, frame: dict[str, Any]) -> None:
        request_id = request_id_of(frame)
        request = await self.own_request(request_id)
        given = frame.get("reason")
        reason = given if isinstance(given, str) and given else "withdrawn by the agent"
        if "\x00" in reason:  # refused as the REST cancel refuses it (400)
            raise FrameError("invalid_frame", '"reason" contains a NUL character, which cannot be stored')
        self.refs.setdefault(request_id, [frame.get("ref")])
        await db(services.request_cancel)(request=request, reason=reason[:200])
        # Cancelled now or decided just before: either way the agent hears the outcome.
        await self.deliver([request_id])

    async def on_progress(self, frame: dict[str, Any]) -> None:
        request_id = request_id_of(frame)
        await self.request_in_play(request_id, "progress")
        team_id = self.team_of[request_id]
        event = {"type": "request.progress", "request_id": str(request_id), "data": frame.get("data")}
        events.send([events.team_group(team_id), events.ALL_TEAMS_GROUP], event)

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
        if request_id is None:
            return
        if request_id not in self.refs:
            self.early[request_id] = event
            while len(self.early) > MAX_EARLY_DOORBELLS:
                self.early.popitem(last=False)
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
