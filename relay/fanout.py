"""Per-process fan-out to sockets: one subscription per group, one card render per event.

`LocalGroups` (below) subscribes the process once to each bus group (a team's, an
agent's) and hands every event to the inboxes of the sockets that joined; `CardFanout`
renders each pushed card once per process and event, and shares it between the
dashboards.

Every dashboard socket of a team hears the same `request.created` / `request.decided`
doorbell. Rendering the card per socket meant, per event and per socket, a worker
thread, a fresh database connection, three queries and a template: 20 dashboards made
the 20th wait for 19 renders. Now the process, as the event arrives at a group a
dashboard joined, reads the request, its decision and the team's memberships in one
worker-thread call and renders the card once per role the team has (with the decide
form for approvers, without it for viewers); the sockets of the process await that same
work and take the variant their user's role allows, as a frame JSON-encoded once per
variant. The cards of calls decided at submit, handed over once per tick, are read in
one such call per tick, all of them in two statements sent together; only the newest
few, as many as the page's "Recently decided" list keeps (`shown_of`). An ask committed
in this process is read in the ask's own message, its statements after the insert
(`read_here`), and rendered by the thread that committed it, right after its doorbell:
its sockets wait for that card instead of crossing to a worker thread once the doorbell
reaches them.

Who sees what is decided as before, per socket and from the database at event time:
the memberships are read with the card, so a person removed from the team gets nothing
from the next event on, a viewer gets the card without the form, and a socket whose user
is not in the card's team (or is inactive) gets nothing at all.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
import math
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async

from approvals import events, permissions, selectors, teambus
from approvals.cards import render_card_as, render_pending_card_variants
from approvals.models import PermissionRequest, RequestState, Role
from approvals.written import Statement
from relay import selectors as relay_selectors

log = logging.getLogger(__name__)

# A socket that handles the event later than this (a very busy process) renders afresh:
# long enough for every socket of one doorbell, short enough that a membership change
# reaches the next event's readers.
RETAIN_SECONDS = 5.0
MAX_ENTRIES = 1000


@dataclass(frozen=True)
class PushedCard:
    """One request's card as read at event time, in both variants."""

    id: str
    team_id: int
    roles: Mapping[int, str]  # the team's members when the card was read
    html_approver: str  # with the decide form while the request is pending
    html_viewer: str | None  # without it; None when the team had no viewer to show it to
    # Each frame the sockets send of this card, JSON-encoded by the first of them
    # (relay.consumers.dashboard.card_frame): per variant and event, not per socket.
    frames: dict[tuple[Any, ...], str] = field(default_factory=dict, compare=False, repr=False)

    def html_for(self, user: Any) -> str | None:
        """The variant `user` may see, or None when the card is not theirs to see."""
        role = permissions.role_among(user, self.roles)
        if permissions.at_least(role, Role.APPROVER):
            return self.html_approver
        if role == Role.VIEWER:
            return self.html_viewer
        return None


def load_cards(
    request_ids: Collection[uuid.UUID], asked: Collection[uuid.UUID] = ()
) -> dict[uuid.UUID, PushedCard | None]:
    """Read and render these cards for every socket: each id's card, None where there is
    no such request (ORM work: call from a worker thread).

    - Two statements however many cards, sent together: the requests, and their teams'
      memberships; and one for each of the `asked` ids (announced by an `ASKED_EVENTS`
      event): what its pending card says "since last allowed" about.
    """
    return render_cards(request_ids, *relay_selectors.requests_for_cards(request_ids, asked=asked))


def render_cards(
    request_ids: Collection[uuid.UUID],
    requests: Mapping[uuid.UUID, PermissionRequest],
    teams: Mapping[int, dict[int, str]],
) -> dict[uuid.UUID, PushedCard | None]:
    """The cards of `request_ids` from what `relay.selectors.requests_for_cards` read."""
    cards: dict[uuid.UUID, PushedCard | None] = dict.fromkeys(request_ids)
    for request_id, request in requests.items():
        cards[request_id] = _render(request, teams[request.team_id])
    return cards


def _render(request: PermissionRequest, roles: dict[int, str]) -> PushedCard:
    if request.state != RequestState.PENDING:
        # Nobody can decide any more: one card for everyone.
        html = render_card_as(request, can_decide=False, decision=selectors.joined_decision(request))
        return PushedCard(str(request.pk), request.team_id, roles, html, html)
    # Superusers (not members) see the approver's card, so it is always rendered; the
    # viewer's only when the team has a viewer.
    html_approver, html_viewer = render_pending_card_variants(request, for_viewers=Role.VIEWER in roles.values())
    return PushedCard(str(request.pk), request.team_id, roles, html_approver, html_viewer)


class CardFanout:
    """A small per-process cache of in-flight and just-rendered cards, keyed by event."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._entries: OrderedDict[tuple[Any, ...], tuple[float, asyncio.Future[PushedCard | None]]] = OrderedDict()

    async def card(self, event: dict[str, Any]) -> PushedCard | None:
        """The card this event announces; the first caller reads it, the others wait for it."""
        # Every socket of the process asks for the same event's card: after the first, a
        # lookup, not a read's set-up (and the id is parsed once per spelling, `_key`).
        key = _key(event)
        if key is None:
            return None
        entry = self._entries.get(key) if self._loop is asyncio.get_running_loop() else None
        if entry is not None and time.monotonic() - entry[0] < RETAIN_SECONDS:
            future: asyncio.Future[PushedCard | None] | None = entry[1]
        else:
            future = self.read(event)
        if future is None:
            return None
        if future.done():  # the other sockets of the process, once the first has it
            return future.result()
        # Shielded: one socket closing while it waits must not cancel the others' card.
        return await asyncio.shield(future)

    def reading(self, event: dict[str, Any]) -> bool:
        """Whether this event's card is read, or being read, in this process."""
        key = _key(event)
        if key is None or self._loop is not asyncio.get_running_loop():
            return False
        return key in self._entries

    def read(self, event: dict[str, Any]) -> asyncio.Future[PushedCard | None] | None:
        """Start reading the card this event announces, unless it is read or being read.

        - Call on the event loop. None when the event names no request.
        """
        key = _key(event)
        if key is None:
            return None
        self.read_together([event])
        return self._entries[key][1]

    def read_together(self, events: list[dict[str, Any]]) -> None:
        """Start reading the cards these events announce that are neither read nor being
        read, in one worker-thread call (`load_cards`). Call on the event loop."""
        loop = asyncio.get_running_loop()
        self._use(loop)
        now = time.monotonic()
        self._forget_old(now)
        wanted: dict[tuple[Any, ...], uuid.UUID] = {}
        for event in events:
            key = _key(event)
            if key is not None and key not in self._entries:
                wanted[key] = key[1]
        if not wanted:
            return
        asked = {request_id for (kind, request_id, _), request_id in wanted.items() if kind in ASKED_EVENTS}
        read = asyncio.ensure_future(
            database_sync_to_async(load_cards, thread_sensitive=False)(set(wanted.values()), asked)
        )
        futures: dict[tuple[Any, ...], asyncio.Future[PushedCard | None]] = {}
        for key in wanted:
            future = futures[key] = loop.create_future()
            future.add_done_callback(functools.partial(self._forget_failed, key))
            self._entries[key] = (now, future)
        read.add_done_callback(lambda done: _settle(done, futures, wanted))

    def read_here(self, request_id: uuid.UUID, team_id: int) -> CardHere | None:
        """The card of an ask about to be inserted in this thread, read in the ask's own
        message for this process's sockets (`approvals.extensions.CardReader`); None when
        none of them shows the team's cards. Other processes read the card as before."""
        loop = GROUPS.cards_loop(events.team_group(team_id), events.ALL_TEAMS_GROUP)
        if loop is None:
            return None
        return CardHere(self, loop, request_id, relay_selectors.cards_statements([request_id], asked=[request_id]))

    def expect(
        self, loop: asyncio.AbstractEventLoop, key: tuple[Any, ...], read: concurrent.futures.Future[PushedCard | None]
    ) -> None:
        """Make `key`'s entry the card another thread reads (`CardHere`), unless it is read
        or being read already: the sockets then wait for `read` and start no read of their
        own. Call on `loop`."""
        self._use(loop)
        now = time.monotonic()
        self._forget_old(now)
        if key in self._entries:
            return
        future = asyncio.wrap_future(read, loop=loop)
        future.add_done_callback(functools.partial(self._forget_failed, key))
        self._entries[key] = (now, future)

    def _use(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop:  # a future belongs to one event loop
            self._loop, self._entries = loop, OrderedDict()

    def _forget_old(self, now: float) -> None:
        while self._entries:
            key, (started, future) = next(iter(self._entries.items()))
            if len(self._entries) <= MAX_ENTRIES and (now - started < RETAIN_SECONDS or not future.done()):
                return
            del self._entries[key]

    def _forget_failed(self, key: tuple[Any, ...], future: asyncio.Future[PushedCard | None]) -> None:
        # A read that failed (the database blinked) is not remembered: the next socket retries.
        if future.cancelled() or future.exception() is not None:
            entry = self._entries.get(key)
            if entry is not None and entry[1] is future:
                del self._entries[key]


@dataclass
class CardHere:
    """An ask's card read in the ask's own message (`CardFanout.read_here`): its
    `statements` go after the insert, in the same round trip; `committed` hands the
    rows to this process's sockets (`approvals.extensions.CardRead`)."""

    fanout: CardFanout
    loop: asyncio.AbstractEventLoop
    request_id: uuid.UUID
    statements: list[Statement]

    def committed(self, rows: Sequence[list[tuple[Any, ...]]]) -> Callable[[], None] | None:
        """Call in the committing thread before ringing `request.created`.

        - The card's entry is made on the event loop before the doorbell rings there
          (both are handed to the loop from this thread, in that order), so the sockets
          wait for this card and start no read of their own; the returned render, run
          after the doorbell, completes it (a failure reaches the sockets as their own
          read's would).
        """
        read: concurrent.futures.Future[PushedCard | None] = concurrent.futures.Future()
        try:
            key = _entry_key("request.created", self.request_id, None)
            self.loop.call_soon_threadsafe(self.fanout.expect, self.loop, key, read)
        except RuntimeError:  # the loop closed under us (the process is stopping)
            return None
        ids = [self.request_id]

        def render() -> None:
            try:
                read.set_result(render_cards(ids, *relay_selectors.cards_read(ids, ids, rows))[self.request_id])
            except Exception as exc:
                read.set_exception(exc)

        return render


def _settle(
    read: asyncio.Future[dict[uuid.UUID, PushedCard | None]],
    futures: dict[tuple[Any, ...], asyncio.Future[PushedCard | None]],
    wanted: dict[tuple[Any, ...], uuid.UUID],
) -> None:
    """Hand each event's future its card from the read of them all, or the read's failure."""
    error = None if read.cancelled() else read.exception()
    for key, future in futures.items():
        if future.done():
            continue
        if read.cancelled():
            future.cancel()
        elif error is not None:
            future.set_exception(error)
        else:
            future.set_result(read.result()[wanted[key]])


def _key(event: dict[str, Any]) -> tuple[str, uuid.UUID, int | None] | None:
    """An event's entry: its type, request id and decision id; None when the event names
    no request (or is not what a doorbell can be: a type that is not text, a decision id
    that is not a number).

    - Parsed ids are kept per spelling (`_ids`): every socket of the process asks for
      the same event's card, and only the first parses its id.
    """
    kind, request_id, decision_id = event.get("type"), event.get("request_id"), event.get("decision_id")
    if not isinstance(kind, str) or not isinstance(request_id, str):
        return None
    if not (decision_id is None or isinstance(decision_id, int)):
        return None
    parsed = _ids.get(request_id)
    if parsed is None:
        parsed = relay_selectors.parse_request_id(request_id)
        if parsed is None:
            return None
        if len(_ids) >= MAX_ENTRIES:
            _ids.clear()
        _ids[request_id] = parsed
    return _entry_key(kind, parsed, decision_id)


def _entry_key(kind: str, request_id: uuid.UUID, decision_id: int | None) -> tuple[str, uuid.UUID, int | None]:
    """The one shape of an entry's key: an event's (`_key`) and an ask read where it was committed."""
    return (kind, request_id, decision_id)


_ids: dict[str, uuid.UUID] = {}


CARDS = CardFanout()
# The events a dashboard shows a card for (relay.consumers.dashboard).
CARD_EVENTS = frozenset(
    {"request.created", "request.updated", "request.decided", "request.cancelled", "request.expired"}
)
# Those of a pending card: its read brings "since last allowed" along (`load_cards`).
ASKED_EVENTS = frozenset({"request.created", "request.updated"})


# --- one subscription per group and process -----------------------------------------------

# A socket whose inbox holds this many events (a handler stuck on a dead database, a
# process past what its cores can do) is behind: see `Inbox.fall_behind`. (Until the
# eighteenth pass the events past the bound were dropped, one warning each, and the
# socket went on with the 1,000 before them: a dashboard never showed an ask whose
# `request.created` it missed, nothing re-reads a card the page does not know of, and
# working through the backlog, every card read afresh, took a loaded soak's dashboards
# up to five minutes.)
MAX_BACKLOG = 1000
LOST = "fanout.lost"


class Inbox(asyncio.Queue[dict[str, Any]]):
    """A socket's one queue: its client's frames (`websocket.*`) and its groups' events, in
    the order they arrived."""

    behind = False

    def _init(self, maxsize: int) -> None:  # asyncio.Queue's hook for the queue it keeps
        self._queue: collections.deque[dict[str, Any]] = collections.deque()

    def fall_behind(self, group: str, bound: int) -> int:
        """Drop the events waiting here, keep the client's frames, and put `LOST` after them.

        - The socket closes (4011) as it reaches `LOST`, soon: the page reconnects and
          refetches, the agent reconnects and resumes, as when the process loses its
          subscription. No group puts anything here from then on.
        - Returns how many events were dropped.
        """
        self.behind = True
        frames = [message for message in self._queue if str(message.get("type", "")).startswith("websocket.")]
        dropped = len(self._queue) - len(frames)
        self._queue.clear()
        self._queue.extend(frames)
        self.put_nowait({"type": LOST, "group": group, "behind": bound})
        return dropped


# The events of calls decided at submit (`at_submit`: never pending, their cards only feed
# the dashboards' "recent" lists) are handed to a group's sockets together, as one
# `GATHERED` event, this long after the first of them: one frame per socket per tick
# instead of one per call, holding the newest the page keeps (`shown_of`). Their cards are
# read then, together: one worker-thread call and one round trip (two statements) per tick
# instead of one call and two statements per card.
GATHER_SECONDS = 0.1
# And at most this often: under a flood of calls decided at submit, a tick every 0.1 s
# replaced the page's "Recently decided" list ten times a second, each time with cards
# read, rendered and sent that nobody could read in that time. A call after a quiet spell
# still shows within `GATHER_SECONDS`.
HAND_OVER_SECONDS = 0.5
GATHERED = "requests.gathered"


@dataclass(eq=False)
class _LocalGroup:
    name: str
    inboxes: set[Inbox]
    ready: asyncio.Future[None] | None = None
    cards: bool = False  # a socket that shows cards joined: the process reads the events' cards
    gathered: list[dict[str, Any]] = field(default_factory=list)
    tick: asyncio.TimerHandle | None = None
    handed_at: float = -math.inf  # the event loop's time of the last hand-over


class LocalGroups:
    """The process subscribes once to each bus group and hands its events to its sockets.

    A team with 20 dashboards in one process hears each doorbell once, on the process's
    one subscription (`approvals.teambus`: Redis pub/sub), and puts it into the inbox of
    every socket that joined.

    The events of calls decided at submit are gathered per group and handed over once
    per tick (`GATHER_SECONDS` after the first, and `hand_over_seconds` after the last
    hand-over at the earliest) as one `requests.gathered` event listing the newest the
    page keeps (`shown_of`), in the order they arrived. The group's other events are
    handed over as they arrive, without waiting for the tick: a call decided at submit
    has no other event (it was never pending, and nothing re-renders a finished card),
    so no event of the same request can overtake it. Every other event keeps the order
    it arrived in.

    If that subscription breaks (Redis restarted), every member inbox gets a `fanout.lost`
    event: the socket closes (4011) and the page reconnects, subscribes and refetches, or
    the agent reconnects and resumes. So does a socket whose inbox is `max_backlog` events
    behind, alone, at once (`Inbox.fall_behind`).
    """

    def __init__(self, max_backlog: int = MAX_BACKLOG, hand_over_seconds: float = HAND_OVER_SECONDS) -> None:
        self.max_backlog = max_backlog
        self.hand_over_seconds = hand_over_seconds
        self._loop: asyncio.AbstractEventLoop | None = None
        self._groups: dict[str, _LocalGroup] = {}
        self._subscription: teambus.Subscription | None = None

    async def join(self, group: str, inbox: Inbox, *, cards: bool = False) -> None:
        """Deliver the group's events into `inbox` from when this returns.

        - `cards`: the socket shows the events' cards (a dashboard). From then on the
          process starts reading each event's card as the event arrives (a gathered
          one's at hand-over, with the others of its tick): every socket handles its
          inbox in order and would otherwise wait for each card in turn.
        """
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._groups, self._subscription = loop, {}, None
        local = self._groups.get(group)
        if local is None:
            local = self._groups[group] = _LocalGroup(group, set())
            local.ready = asyncio.ensure_future(self._subscribe(local))
        local.inboxes.add(inbox)
        local.cards = local.cards or cards
        assert local.ready is not None
        try:
            await asyncio.shield(local.ready)
        except Exception:
            local.inboxes.discard(inbox)
            raise

    async def leave(self, group: str, inbox: Inbox) -> None:
        local = self._groups.get(group)
        if local is None or inbox not in local.inboxes:
            return
        local.inboxes.discard(inbox)
        if local.inboxes:
            return
        del self._groups[group]
        _stop_tick(local)
        if local.ready is not None and not local.ready.done():
            await asyncio.wait([local.ready])
        subscription = self._subscription
        if subscription is None or local.ready is None or local.ready.exception() is not None:
            return
        try:
            await subscription.remove(group)
        except Exception:  # the subscription broke meanwhile; `_lost` has dropped it
            log.warning("could not leave %s", group, exc_info=True)

    def cards_loop(self, *groups: str) -> asyncio.AbstractEventLoop | None:
        """The running event loop of this process's sockets when one that shows cards has
        joined one of these groups; None otherwise. Safe to call from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            return None
        local_groups = self._groups
        if any(local is not None and local.cards for local in map(local_groups.get, groups)):
            return loop
        return None

    def members(self, group: str) -> int:
        local = self._groups.get(group)
        return len(local.inboxes) if local is not None else 0

    async def _subscribe(self, local: _LocalGroup) -> None:
        if self._subscription is None:
            self._subscription = teambus.subscribe(self._deliver, self._lost)
        try:
            await self._subscription.add(local.name)
        except Exception:
            # Not remembered: the next socket to join tries again.
            if self._groups.get(local.name) is local:
                del self._groups[local.name]
            raise

    def _deliver(self, group: str, event: dict[str, Any]) -> None:
        local = self._groups.get(group)
        if local is None:
            return
        if event.get("at_submit") is True:
            local.gathered.append(event)  # its card is read with the others at hand-over
            if local.tick is None:
                loop = asyncio.get_running_loop()
                wait = max(GATHER_SECONDS, local.handed_at + self.hand_over_seconds - loop.time())
                local.tick = loop.call_later(wait, self._hand_over, local)
            return
        if local.cards and event.get("type") in CARD_EVENTS:
            CARDS.read(event)  # on a worker thread, beside the other cards being read
        self._put(local, event)

    def _hand_over(self, local: _LocalGroup) -> None:
        """Put what the group gathered into its inboxes as one event (nothing when nothing was)."""
        _stop_tick(local)
        local.handed_at = asyncio.get_running_loop().time()
        if local.gathered:
            gathered, local.gathered = shown_of(local.gathered), []
            if local.cards:
                CARDS.read_together(gathered)
            self._put(local, {"type": GATHERED, "events": gathered})

    def _put(self, local: _LocalGroup, event: dict[str, Any]) -> None:
        for inbox in list(local.inboxes):
            if inbox.behind:
                continue  # it closes at its `LOST`, and catches up on its next socket
            if inbox.qsize() < self.max_backlog:
                inbox.put_nowait(event)
                continue
            dropped = inbox.fall_behind(local.name, self.max_backlog)
            log.warning("a socket fell %d events behind on %s; dropped them, told it to reconnect", dropped, local.name)

    def _lost(self, error: BaseException) -> None:
        log.warning("lost the subscription to the doorbell groups; closing their sockets: %s", error)
        # The subscription closes itself; the next socket to join starts a new one.
        groups, self._groups, self._subscription = self._groups, {}, None
        for local in groups.values():
            _stop_tick(local)  # what it gathered is lost with the rest: the page refetches
            for inbox in list(local.inboxes):
                inbox.put_nowait({"type": LOST, "group": local.name})


def shown_of(gathered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of a tick handed to the sockets: the newest few, oldest first.

    - A tick's calls decided at submit only feed the page's "Recently decided" list, which
      keeps the newest `RECENT_FINISHED` (static/queue.js drops the rest): a card older
      than those would be dropped as it arrives, so it is neither read nor sent. Under a
      flood of auto-decided calls that is most of them. Only dashboards hear a team's
      group; the audit log and the API keep every call.
    """
    return [event for event in gathered if event.get("type") in CARD_EVENTS][-selectors.RECENT_FINISHED :]


def _stop_tick(local: _LocalGroup) -> None:
    if local.tick is not None:
        local.tick.cancel()
        local.tick = None


GROUPS = LocalGroups()
