"""Announce committed state changes: the channel layer is a doorbell, the database the truth.

Groups:
- `team.<team_id>`: every dashboard of that team's members (superusers join `team.all`).
- `agent.<agent_id>`: every socket of that agent.
- `request.<uuid>`: long-poll waiters for one request.
- `user.<user_id>`: every dashboard socket of one person (closed on logout).

Events are dicts with `type` in `request.created`, `request.claimed`,
`request.decided`, `request.cancelled`, `request.expired`, `request.progress`,
`request.updated` (a quorum vote or an escalation ladder step);
Channels maps the type to the consumer method `request_decided` and so on. Each type's
shape is in `approvals/event_schema.py`, checked in the tests against events caught on
the real channel layer.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import BaseChannelLayer, get_channel_layer
from django.db import transaction

from approvals import selectors
from approvals.extensions import registry
from approvals.models import Decision, PermissionRequest, RequestState

log = logging.getLogger(__name__)

ALL_TEAMS_GROUP = "team.all"


def team_group(team_id: int) -> str:
    return f"team.{team_id}"


def agent_group(agent_id: int) -> str:
    return f"agent.{agent_id}"


def request_group(request_id: object) -> str:
    return f"request.{request_id}"


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def end_user_sessions(user_id: int) -> None:
    """Close every open dashboard socket of this person, on every device (the logout view calls it)."""
    send([user_group(user_id)], {"type": "session.ended"})


def finished_event_type(request: PermissionRequest) -> str:
    return {
        RequestState.CANCELLED: "request.cancelled",
        RequestState.EXPIRED: "request.expired",
    }.get(RequestState(request.state), "request.decided")


def send(groups: list[str], event: dict[str, Any]) -> None:
    """Send one event to groups now; a lost doorbell is logged, never raised."""
    layer = get_channel_layer()
    if layer is None:
        return
    # One hop to the event loop for all the groups, not one each: from a sync thread every
    # async_to_sync is a round trip through the loop (or a new loop, outside a server).
    try:
        async_to_sync(_send_all)(layer, groups, event)
    except Exception:  # the database stays the truth; clients refetch on reconnect
        log.exception("event %s to %s was not delivered", event.get("type"), groups)


async def _send_all(layer: BaseChannelLayer, groups: list[str], event: dict[str, Any]) -> None:
    outcomes = await asyncio.gather(*(layer.group_send(group, event) for group in groups), return_exceptions=True)
    for group, outcome in zip(groups, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            log.error("event %s to %s was not delivered", event.get("type"), group, exc_info=outcome)


def request_groups(request: PermissionRequest) -> list[str]:
    return [
        team_group(request.team_id),
        ALL_TEAMS_GROUP,
        agent_group(request.agent_id),
        request_group(request.pk),
    ]


def announce_created(request: PermissionRequest) -> None:
    """Call inside the transaction that stored the pending request."""

    def fire() -> None:
        send(
            [team_group(request.team_id), ALL_TEAMS_GROUP],
            {"type": "request.created", "request_id": str(request.pk)},
        )
        for announcer in registry.announcers:
            _safely(announcer.name, announcer.request_created, request)

    transaction.on_commit(fire)


def announce_finished(request: PermissionRequest, decision: Decision, *, at_submit: bool = False) -> None:
    """Call inside the transaction that wrote the decision's audit row.

    - `at_submit`: decided in the transaction that created it. Then only the teams'
      dashboards are rung: the submitter has the answer in hand, and nobody else can be
      waiting on the agent or the request before learning its id from that answer.
    """
    groups = [team_group(request.team_id), ALL_TEAMS_GROUP] if at_submit else request_groups(request)

    def fire() -> None:
        send(
            groups,
            {
                "type": finished_event_type(request),
                "request_id": str(request.pk),
                "decision_id": decision.pk,
                "state": request.state,
                "behavior": decision.behavior,
                "decided_by": decision.decided_by,
                "surface": decision.surface,
                **_decision_payload(decision),
            },
        )
        for announcer in registry.announcers:
            if at_submit and getattr(announcer, "asks_only", False):
                continue
            _safely(announcer.name, announcer.request_finished, request, decision)

    transaction.on_commit(fire)


def announce_updated(request: PermissionRequest, row: Decision) -> None:
    """Call inside the transaction that wrote a vote's or a ladder step's audit row.

    - Rings the teams' dashboards (the card shows "1 of 2 — alice approved") and calls
      `request_updated(request, row)` on each announcer that has it (the chat bridges).
    """

    def fire() -> None:
        send(
            [team_group(request.team_id), ALL_TEAMS_GROUP],
            {"type": "request.updated", "request_id": str(request.pk), "decision_id": row.pk, "kind": row.kind},
        )
        for announcer in registry.announcers:
            handler = getattr(announcer, "request_updated", None)
            if handler is not None:
                _safely(announcer.name, handler, request, row)

    transaction.on_commit(fire)


# The decision rides along so agent sockets answer without re-reading it (the relay
# falls back to the database when it is missing). A rewritten input past this size stays
# out of the channel layer: every group of the request would carry it.
PUSHED_INPUT_MAX_BYTES = 16 * 1024


def _decision_payload(decision: Decision) -> dict[str, Any]:
    payload = selectors.decision_payload(decision)
    updated = payload["updated_input"]
    if updated is not None and len(json.dumps(updated, default=str)) > PUSHED_INPUT_MAX_BYTES:
        return {}
    return {"decision": payload}


def _safely(name: str, func: Any, *args: Any) -> None:
    # One broken surface (a chat API down) must not stop the others being told.
    try:
        func(*args)
    except Exception:
        log.exception("announcer %s failed", name)
