"""Announce committed state changes: the channel layer is a doorbell, the database the truth.

Groups:
- `team.<team_id>`: every dashboard of that team's members (superusers join `team.all`);
  rung on Redis pub/sub and heard once per server process (`approvals.teambus`).
- `agent.<agent_id>`: every socket of that agent; on the same bus as the teams'.
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
import functools
import json
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import BaseChannelLayer, get_channel_layer
from django.db import transaction

from approvals import selectors, teambus
from approvals.extensions import CardRead, registry
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


def send(groups: list[str], event: dict[str, Any], *, hand_over: bool = False) -> None:
    """Ring groups with one event; a lost doorbell is logged, never raised.

    - In a server process the doorbell is handed to the event loop and the caller goes on:
      the request that committed the change answers without waiting for Redis (1-2 ms of
      round trips, more under load). `Doorbells` keeps the events of one request in the
      order they were rung. A coroutine on the loop rings the same way.
    - `hand_over`: someone waits on this doorbell (an agent on its decision), so the
      request's thread waits, up to `HAND_OVER_SECONDS`, until the loop has rung it, and
      lets the loop go first. Else the thread's work after the commit (the announcers,
      the claim's release, the autopilot) held the interpreter while the loop waited
      for it to ring (`docs/PERFORMANCE.md`, 2026-12-07, twenty-second pass).
    - Elsewhere (a management command, the sweeper, a test) it is sent before this returns.
    """
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None:  # a coroutine on the loop
        DOORBELLS.ring(layer, groups, event)
        return
    loop = _server_loop()
    if loop is not None:
        rung = threading.Event() if hand_over else None
        try:
            loop.call_soon_threadsafe(_ring, layer, groups, event, rung)
        except RuntimeError:  # the loop closed under us (the process is stopping)
            log.warning("event %s to %s was not delivered: the server is stopping", event.get("type"), groups)
            return
        if rung is not None:
            # Bounded: a loop that does not come to it in time rings it all the same, later.
            rung.wait(HAND_OVER_SECONDS)
        return
    _send_now(layer, groups, event)


# How long a request's thread waits for the loop to ring a doorbell it hands over: a
# loop's turn takes well under a millisecond. The bound is for a loop that will not come
# to it (a process stopping): the request then answers, and the doorbell rings if it can.
HAND_OVER_SECONDS = 0.5


def _ring(layer: BaseChannelLayer, groups: list[str], event: dict[str, Any], rung: threading.Event | None) -> None:
    try:
        DOORBELLS.ring(layer, groups, event)
    finally:
        if rung is not None:
            rung.set()


def _send_now(layer: BaseChannelLayer, groups: list[str], event: dict[str, Any]) -> None:
    """Send from a thread with no server loop: the bus's groups at once, the others through a loop of their own."""
    for group in (g for g in groups if teambus.on_bus(g)):
        try:
            teambus.publish_now(group, event)
        except Exception:  # the database stays the truth; clients refetch on reconnect
            log.exception("event %s to %s was not delivered", event.get("type"), group)
    others = [g for g in groups if not teambus.on_bus(g)]
    if not others:
        return
    # One hop to a loop for all the groups, not one each: from a sync thread every
    # async_to_sync is a round trip through a new loop.
    try:
        async_to_sync(_send_all)(layer, others, event)
    except Exception:
        log.exception("event %s to %s was not delivered", event.get("type"), others)


def _server_loop() -> asyncio.AbstractEventLoop | None:
    """The running event loop this thread works for, if it is a server's request or database thread.

    asgiref records it for every thread it runs sync code in (`SyncToAsync.threadlocal`,
    what its own `async_to_sync` reads); another process's record (a fork) does not count.
    """
    local = SyncToAsync.threadlocal
    loop: asyncio.AbstractEventLoop | None = getattr(local, "main_event_loop", None)
    if loop is None or getattr(local, "main_event_loop_pid", None) != os.getpid() or not loop.is_running():
        return None
    return loop


# The doorbells of calls decided at submit only feed the dashboards' "recent" lists, which
# each process hands to its sockets gathered per tick (`relay.fanout`, at most twice a
# second). So the other processes hear them gathered too: one message per bus group this
# long after the first, not two publishes per call and each process's copy of each. A call
# decided at submit reaches another process's dashboards up to this much later.
GATHERED_PUBLISH_SECONDS = 0.1


@dataclass(eq=False)
class _Gathered:
    """The doorbells of calls decided at submit rung since the last gathered publish."""

    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # per bus group, in the order rung
    keys: list[str] = field(default_factory=list)  # their requests
    task: asyncio.Task[None] = field(init=False)  # the publish, set as the batch starts


class Doorbells:
    """A server process's doorbells, sent on its event loop; one request's in the order rung.

    Doorbells of different requests are sent side by side. Those of one request wait for
    the one before: its dashboards must not hear `request.decided` before
    `request.created` (a classifier can answer within the created doorbell's round trips).
    This process's own sockets hear each doorbell as it is rung, so in that order too.

    The doorbells of calls decided at submit (`at_submit`, all on the bus) are published
    gathered, `GATHERED_PUBLISH_SECONDS` after the first of them; a later doorbell of one
    of those requests waits for that publish.
    """

    def __init__(self) -> None:
        self._last: dict[str, asyncio.Task[None]] = {}  # per request id, its newest doorbell in flight
        self._sending: set[asyncio.Task[None]] = set()  # held until done: the loop keeps weak references
        self._gathered: _Gathered | None = None

    def ring(self, layer: BaseChannelLayer, groups: list[str], event: dict[str, Any]) -> None:
        """Call on the event loop.

        This process's own sockets of the bus's groups hear the doorbell here, in the
        order rung, before anything is sent: an agent waiting on a decision is woken on
        the loop's next turn, not after the publishes (each a Redis round trip and a turn
        of the loop, slow ones when the commit's other threads hold the interpreter).
        """
        for group in groups:
            if teambus.on_bus(group):
                try:
                    teambus.hear_here(group, event)
                except Exception:  # the other groups and processes are rung all the same
                    log.exception("event %s to %s was not delivered in this process", event.get("type"), group)
        key = event.get("request_id")
        if event.get("at_submit") is True and all(teambus.on_bus(group) for group in groups):
            self._gather(groups, event, key)
            return
        before = self._last.get(key) if isinstance(key, str) else None
        task = asyncio.get_running_loop().create_task(self._send(before, layer, groups, event))
        self._sending.add(task)
        task.add_done_callback(functools.partial(self._sent, [key]))
        if isinstance(key, str):
            self._last[key] = task

    def _gather(self, groups: list[str], event: dict[str, Any], key: Any) -> None:
        gathered = self._gathered
        loop = asyncio.get_running_loop()
        if gathered is None or gathered.task.done() or gathered.task.get_loop() is not loop:
            gathered = self._gathered = _Gathered()
            gathered.task = loop.create_task(self._publish_gathered(gathered))
            self._sending.add(gathered.task)
            gathered.task.add_done_callback(functools.partial(self._sent, gathered.keys))
        for group in groups:
            gathered.events.setdefault(group, []).append(event)
        if isinstance(key, str):
            gathered.keys.append(key)
            self._last[key] = gathered.task

    def in_flight(self) -> int:
        """Doorbells rung and not yet sent (or failed)."""
        return len(self._sending)

    async def idle(self) -> None:
        """Return once every doorbell rung so far is sent or has failed."""
        while self._sending:
            await asyncio.wait(list(self._sending))

    @staticmethod
    async def _send(
        before: asyncio.Task[None] | None, layer: BaseChannelLayer, groups: list[str], event: dict[str, Any]
    ) -> None:
        if before is not None and before.get_loop() is asyncio.get_running_loop():
            await asyncio.wait([before])
        try:
            await _send_all(layer, groups, event)
        except Exception:
            log.exception("event %s to %s was not delivered", event.get("type"), groups)

    async def _publish_gathered(self, gathered: _Gathered) -> None:
        await asyncio.sleep(GATHERED_PUBLISH_SECONDS)
        if self._gathered is gathered:  # what is rung from now on goes in the next
            self._gathered = None
        try:
            await teambus.publish_gathered(gathered.events)
        except Exception:
            named = ", ".join(gathered.events)
            log.exception("%d gathered event(s) to %s were not delivered", len(gathered.keys), named)

    def _sent(self, keys: list[Any], task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        for key in keys:
            if isinstance(key, str) and self._last.get(key) is task:
                del self._last[key]


DOORBELLS = Doorbells()


async def _send_all(layer: BaseChannelLayer, groups: list[str], event: dict[str, Any]) -> None:
    # The teams' and agents' groups are heard by each process's one subscription
    # (approvals.teambus; this process's heard them as they were rung), published together;
    # the others by single sockets on the channel layer.
    on_bus = [group for group in groups if teambus.on_bus(group)]
    others = [group for group in groups if not teambus.on_bus(group)]
    sends = [teambus.publish_elsewhere(on_bus, event), *(layer.group_send(group, event) for group in others)]
    outcomes = await asyncio.gather(*sends, return_exceptions=True)
    for named, outcome in zip([", ".join(on_bus), *others], outcomes, strict=True):
        if isinstance(outcome, BaseException):
            log.error("event %s to %s was not delivered", event.get("type"), named, exc_info=outcome)


def request_groups(request: PermissionRequest) -> list[str]:
    # The agent's first: an agent's socket waits on the decision, a dashboard only shows it.
    return [
        agent_group(request.agent_id),
        team_group(request.team_id),
        ALL_TEAMS_GROUP,
        request_group(request.pk),
    ]


def announce_created(
    request: PermissionRequest, card: CardRead | None = None, card_rows: Sequence[list[tuple[Any, ...]]] = ()
) -> None:
    """Call inside the transaction that stored the pending request, or once it has committed.

    - `card`: the ask's card read in its own message (`registry.cards.read_here`), and
      `card_rows` what that read returned: rendered here for this process's dashboards,
      before the other announcers start their threads; one thread crossing and one round
      trip fewer on the way to them.
    """

    def fire() -> None:
        read_card = card.committed(card_rows) if card is not None else None
        try:
            send(
                [team_group(request.team_id), ALL_TEAMS_GROUP],
                {"type": "request.created", "request_id": str(request.pk)},
            )
        finally:
            if read_card is not None:
                read_card()
        for announcer in registry.announcers:
            _safely(announcer.name, announcer.request_created, request)

    transaction.on_commit(fire)


def announce_finished(request: PermissionRequest, decision: Decision, *, at_submit: bool = False) -> None:
    """Call inside the transaction that wrote the decision's audit row, or once it has committed.

    - `at_submit`: decided in the transaction that created it. Then only the teams'
      dashboards are rung: the submitter has the answer in hand, and nobody else can be
      waiting on the agent or the request before learning its id from that answer. The
      event says so (`at_submit`): its card was never pending on a dashboard and only
      feeds the "recent" list, so each process hands such cards to its sockets gathered
      per tick (`relay.fanout`).
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
                **({"at_submit": True} if at_submit else {}),
                **_decision_payload(decision),
            },
            hand_over=not at_submit,
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
