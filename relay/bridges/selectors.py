"""The bridges' reads: posted messages, linked chat identities."""

from __future__ import annotations

import uuid
from typing import Any

from approvals.models import ChatIdentity, RequestState
from relay.models import SurfaceMessage


def user_for_chat(provider: str, external_id: str) -> Any:
    """The active Gatehouse user linked to a chat account, or None."""
    identity = (
        ChatIdentity.objects.select_related("user")
        .filter(provider=provider, external_id=external_id, user__is_active=True)
        .first()
    )
    return identity.user if identity is not None else None


def surface_message(pk: int) -> SurfaceMessage | None:
    return SurfaceMessage.objects.filter(pk=pk).first()


def surface_message_by_id(surface: str, channel: str, message_id: str) -> SurfaceMessage | None:
    return SurfaceMessage.objects.filter(surface=surface, channel=channel, message_id=message_id).first()


def unfinalised_messages(request_id: uuid.UUID | str, surfaces: list[str]) -> list[SurfaceMessage]:
    return list(
        SurfaceMessage.objects.filter(request__pk=request_id, surface__in=surfaces, finalised_at__isnull=True).order_by(
            "id"
        )
    )


def requests_with_stale_messages(surfaces: list[str], limit: int = 100) -> list[uuid.UUID]:
    """Requests that are over but still have a message showing buttons."""
    rows = (
        SurfaceMessage.objects.filter(surface__in=surfaces, finalised_at__isnull=True)
        .exclude(request__state=RequestState.PENDING)
        .values_list("request_id", flat=True)
        .distinct()[:limit]
    )
    return list(rows)
