"""The bridges' writes: each team's chat route, posted messages and applied chat updates."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from approvals.models import Team
from approvals.services import ServiceError
from relay.models import ChatRoute, ProcessedUpdate, SurfaceMessage


def surface_message_record(
    *, request_id: uuid.UUID | str, surface: str, channel: str, message_id: str
) -> SurfaceMessage:
    """Remember where a request was announced, so the message can be edited later."""
    message, _ = SurfaceMessage.objects.get_or_create(
        surface=surface, channel=channel, message_id=message_id, defaults={"request_id": request_id}
    )
    return message


def surface_message_finalise(message_pk: int) -> bool:
    """Mark a message as showing the request's outcome; False if it already was."""
    unfinalised = SurfaceMessage.objects.filter(pk=message_pk, finalised_at__isnull=True)
    return bool(unfinalised.update(finalised_at=timezone.now()))


def processed_update_claim(*, surface: str, update_id: str) -> bool:
    """Record an inbound update; False if it was already applied (a redelivery or retry).

    - Call inside the transaction that applies the update, so a crash undoes both and
      the redelivered update is applied then — once.
    """
    try:
        with transaction.atomic():
            ProcessedUpdate.objects.create(surface=surface, update_id=update_id[:200])
    except IntegrityError:
        return False
    return True


def processed_updates_prune(*, surface: str, older_than: timedelta = timedelta(days=2)) -> int:
    """Forget applied updates older than any redelivery (Telegram keeps them 24 hours)."""
    cutoff = timezone.now() - older_than
    deleted, _ = ProcessedUpdate.objects.filter(surface=surface, created_at__lt=cutoff).delete()
    return deleted


def chat_route_set(*, team: Team, surface: str, channel: str, approvers: list[str]) -> ChatRoute:
    """Give a team its own chat (or channel) and approver list on one service.

    - Raises `ServiceError` when the chat is another team's: one chat serves one team.
    """
    channel = channel.strip()
    if surface not in ChatRoute.Surface.values:
        raise ServiceError(f"surface must be one of {', '.join(ChatRoute.Surface.values)}, not {surface!r}")
    if not channel:
        raise ServiceError("channel is empty: a Telegram chat id or a Slack channel id")
    cleaned = list(dict.fromkeys(a.strip() for a in approvers if a.strip()))
    taken = ChatRoute.objects.filter(surface=surface, channel=channel).exclude(team=team)
    if taken.exists():
        raise ServiceError(f"{surface} chat {channel} is another team's; one chat serves one team")
    try:
        with transaction.atomic():
            route, _ = ChatRoute.objects.update_or_create(
                team=team, surface=surface, defaults={"channel": channel, "approvers": cleaned}
            )
    except IntegrityError:  # another team took the chat between our check and the write
        raise ServiceError(f"{surface} chat {channel} is another team's; one chat serves one team") from None
    return route


def chat_route_delete(*, team: Team, surface: str) -> bool:
    """Remove a team's route on one service; its asks are then posted nowhere there."""
    deleted, _ = ChatRoute.objects.filter(team=team, surface=surface).delete()
    return deleted > 0
