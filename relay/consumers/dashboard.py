"""The dashboard's socket: a person watches the team's queue live."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.urls import reverse
from django.utils.functional import empty
from django.utils.html import format_html

from approvals import events, permissions, selectors
from approvals.cards import render_card_as
from approvals.models import PermissionRequest, RequestState, Role
from relay import drain, fanout
from relay.consumers.base import (
    CLOSE_UNAUTHENTICATED,
    CLOSE_UNAVAILABLE,
    FrameError,
    GatehouseConsumer,
    TokenBucket,
    db,
    encode_frame,
    request_id_of,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


# What one card may weigh in a frame: a 280 KB command made the snapshot frame too large
# for clients with a 1 MiB frame limit, breaking it for the whole team.
MAX_CARD_BYTES = 64 * 1024
# What one frame of many cards (a snapshot, a batch) may weigh: ~370 ordinary cards passed
# 1 MiB in one frame. They are sent in parts under this size (with a card at most
# MAX_CARD_BYTES, JSON escaping at most doubles it, so a part always fits a 1 MiB client).
MAX_FRAME_BYTES = 256 * 1024
# A subscribe renders every pending card of the person's teams; one socket may ask that
# again only after this long (a reconnect is a new socket and subscribes at once).
SNAPSHOT_MIN_INTERVAL = 2.0
# The channel layer rings each doorbell at most once. Every this many seconds a socket asks
# the database which of the cards it shows as pending are pending no more, and sends what a
# lost `request.decided` would have (as the agent's socket re-checks its own asks).
RECHECK_SECONDS = 3.0
# Requests whose end a socket has sent, so a re-check and a late doorbell send it once.
FINISHED_MEMORY = 1000


def card_within_limit(request_id: uuid.UUID | str, html: str) -> str:
    """The card, or a short stand-in that sends the person to the request's own page."""
    if len(html.encode()) <= MAX_CARD_BYTES:
        return html
    return format_html(
        '<article class="card card-pending" id="req-{id}" data-id="{id}" data-state="pending">'
        '<p>This call is too large to show in the queue ({size} KB). <a href="{url}">Open it</a> '
        "to read it in full and decide.</p></article>",
        id=request_id,
        size=len(html.encode()) // 1024,
        url=reverse("request-detail", args=[request_id]),
    )


def resolved_user(user: Any) -> Any:
    """The person the auth middleware resolved, unwrapped from its lazy object.

    The socket asks who its user is for every card it is handed (`PushedCard.html_for`:
    four attributes); through the lazy wrapper each of them was a call of its own. The
    wrapper resolves once and never again either, so the two answer alike.
    """
    wrapped = getattr(user, "_wrapped", empty)
    return user if wrapped is empty else wrapped


def card_frame(card: fanout.PushedCard, user: Any, frame_type: str, **extra: str | None) -> str | None:
    """The frame announcing `card` to `user`, or None when the card is not theirs to see.

    Every socket of the process that hears the event sends the same bytes per variant,
    so the frame is encoded by the first of them and kept on the card.
    """
    html = card.html_for(user)
    if html is None:
        return None
    key = (frame_type, html is card.html_approver, *extra.items())
    frame = card.frames.get(key)
    if frame is None:
        content = {"type": frame_type, "id": card.id, "html": card_within_limit(card.id, html), **extra}
        frame = card.frames[key] = encode_frame(content)
    return frame


def batch_frame(frames: list[str]) -> str:
    """One `batch` frame of frames already encoded: `{"type": "batch", "frames": [...]}`."""
    return '{"type": "batch", "frames": [' + ", ".join(frames) + "]}"


def _snapshot(user: Any) -> list[dict[str, str]]:
    # One query for the teams the user decides in, not one per card.
    approver_of = permissions.team_ids_for(user, role=Role.APPROVER)
    return [
        {
            "id": str(r.pk),
            "html": card_within_limit(
                r.pk, render_card_as(r, can_decide=approver_of is None or r.team_id in approver_of)
            ),
        }
        for r in selectors.pending_cards(user)
    ]


def parts_under(items: list[T], weight: Callable[[T], int], limit: int = MAX_FRAME_BYTES) -> list[list[T]]:
    """`items` in order, cut into parts whose weights add up to at most `limit` (at least one part).

    - An item heavier than `limit` stands alone in its part.
    """
    parts: list[list[T]] = [[]]
    size = 0
    for item in items:
        heavy = weight(item)
        if parts[-1] and size + heavy > limit:
            parts.append([])
            size = 0
        parts[-1].append(item)
        size += heavy
    return parts


def snapshot_parts(requests: list[dict[str, str]], limit: int = MAX_FRAME_BYTES) -> list[list[dict[str, str]]]:
    """The snapshot cut into parts whose JSON stays under `limit` bytes (at least one part)."""
    return parts_under(requests, lambda item: len(json.dumps(item).encode()) + 1, limit)


# What `batch_frame` adds around its frames, less the one ", " of the frames' weights too many.
_BATCH_ENVELOPE = len(batch_frame([])) - 2


def batch_parts(frames: list[str], limit: int = MAX_FRAME_BYTES) -> list[list[str]]:
    """Encoded frames cut into batches whose JSON stays under `limit` bytes (none for none)."""
    return parts_under(frames, lambda frame: len(frame.encode()) + 2, limit - _BATCH_ENVELOPE) if frames else []


def _visible_team(request_id: uuid.UUID, user: Any) -> int | None:
    request = PermissionRequest.objects.filter(pk=request_id).only("team_id").first()
    if request is None or not permissions.can_see(user, request.team_id):
        return None
    return request.team_id


def _finished_events(request_ids: list[str]) -> list[dict[str, Any]]:
    """The events a finished request announces, for those of `request_ids` no longer pending."""
    found = PermissionRequest.objects.filter(pk__in=request_ids).exclude(state=RequestState.PENDING)
    finished = []
    for request in found.select_related("agent"):
        decision = selectors.decision_for(request)
        finished.append(
            {
                "type": events.finished_event_type(request),
                "request_id": str(request.pk),
                "decision_id": decision.pk if decision is not None else None,
                "behavior": decision.behavior if decision is not None else None,
                "decided_by": decision.decided_by if decision is not None else None,
                "surface": decision.surface if decision is not None else None,
            }
        )
    return finished


class DashboardConsumer(GatehouseConsumer):
    """`/ws/dashboard/`: subscribe, get a snapshot, then live pushes of the user's teams."""

    frame_handlers = {"subscribe": "on_subscribe", "open": "on_open", "close": "on_close"}

    async def connect(self) -> None:
        self.bucket = TokenBucket()
        self.joined: list[str] = []
        self.closing = False
        self.subscribed = False
        self.last_snapshot_at = -SNAPSHOT_MIN_INTERVAL
        self.shown: set[str] = set()  # ids of the cards this socket shows as pending
        self.finished_sent: set[str] = set()
        self.recheck: asyncio.Task[None] | None = None
        self.user = resolved_user(self.scope.get("user"))
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
        if getattr(self, "recheck", None) is not None:
            self.recheck.cancel()  # type: ignore[union-attr]
        await self.leave_bus_groups()
        await self.leave_groups()

    async def on_subscribe(self, frame: dict[str, Any]) -> None:
        # Join first, snapshot second: an event between the two shows up twice at
        # worst (the client replaces by id), never zero times.
        if not self.subscribed:
            team_ids = await db(permissions.team_ids_for)(self.user)
            groups = [events.ALL_TEAMS_GROUP] if team_ids is None else [events.team_group(t) for t in team_ids]
            for group in groups:
                await self.bus_join(group, cards=True)
            self.subscribed = True
        now = time.monotonic()
        wait = self.last_snapshot_at + SNAPSHOT_MIN_INTERVAL - now
        if wait > 0:
            raise FrameError("too_soon", f"a snapshot was just sent; subscribe again in {wait:.1f} s at the earliest")
        self.last_snapshot_at = now
        requests = await db(_snapshot)(self.user)
        self.shown = {item["id"] for item in requests}
        if self.recheck is None:
            self.recheck = asyncio.ensure_future(self.recheck_forever())
        parts = snapshot_parts(requests)
        for number, part in enumerate(parts, start=1):
            await self.send_json({"type": "snapshot", "requests": part, "part": number, "parts": len(parts)})

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
        events.send([events.team_group(team_id), events.ALL_TEAMS_GROUP], event)

    # -- events

    # Cards are rendered once per process and event (relay.fanout) and handed to every
    # socket in the variant its user's role allows, read from the database at event time.

    async def request_created(self, event: dict[str, Any]) -> None:
        card = await fanout.CARDS.card(event)
        frame = card_frame(card, self.user, "request.created") if card is not None else None
        if card is None or frame is None:
            return
        self.shown.add(card.id)
        await self.send_text(frame)

    async def request_updated(self, event: dict[str, Any]) -> None:
        # A quorum vote or a ladder step: the card, re-rendered ("1 of 2 — alice approved").
        card = await fanout.CARDS.card(event)
        frame = card_frame(card, self.user, "request.updated") if card is not None else None
        if frame is not None:
            await self.send_text(frame)

    async def request_finished(self, event: dict[str, Any]) -> None:
        frame = await self._finished_frame(event)
        if frame is not None:
            await self.send_text(frame)

    request_decided = request_finished
    request_cancelled = request_finished
    request_expired = request_finished

    async def requests_gathered(self, event: dict[str, Any]) -> None:
        # The cards of calls decided at submit, gathered per tick by the process
        # (relay.fanout), the newest the page keeps: one `batch` frame (or a few, by size)
        # instead of one per call.
        frames = []
        for each in event["events"]:
            frame = await self._finished_frame(each)
            if frame is not None:
                frames.append(frame)
        for part in batch_parts(frames):
            await self.send_text(batch_frame(part))

    async def _finished_frame(self, event: dict[str, Any]) -> str | None:
        """The frame announcing a finished request to this socket, remembered as sent; None: nothing to send."""
        if str(event.get("request_id")) in self.finished_sent:
            return None  # already sent, by the re-check or the doorbell
        card = await fanout.CARDS.card(event)
        if card is None:
            return None
        fields = {key: event.get(key) for key in ("behavior", "decided_by", "surface")}
        frame = card_frame(card, self.user, event["type"], **fields)
        if frame is None:
            return None
        self.shown.discard(card.id)
        if len(self.finished_sent) >= FINISHED_MEMORY:
            self.finished_sent.clear()
        self.finished_sent.add(card.id)
        return frame

    async def recheck_forever(self) -> None:
        while True:
            await asyncio.sleep(RECHECK_SECONDS)
            if not self.shown or self.closing:
                continue
            try:
                for event in await db(_finished_events)(sorted(self.shown)):
                    await self.request_finished(event)
            except Exception:  # the loop must outlive a blip: it is what catches lost doorbells
                log.warning("dashboard re-check failed", exc_info=True)

    async def request_claimed(self, event: dict[str, Any]) -> None:
        if event.get("sender") != self.channel_name:
            await self.send_json({"type": event["type"], "id": event.get("request_id"), "by": event.get("by")})

    request_released = request_claimed

    async def request_progress(self, event: dict[str, Any]) -> None:
        await self.send_json({"type": "request.progress", "id": event.get("request_id"), "data": event.get("data")})

    async def session_ended(self, event: dict[str, Any]) -> None:
        self.closing = True
        await self.send_error(
            "session_ended", "your session ended (logged out, password changed or account deactivated); log in again"
        )
        await self.close(CLOSE_UNAUTHENTICATED)
