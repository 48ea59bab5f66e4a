"""The bridges' reads: each team's chat route, posted messages, linked chat identities."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from approvals.models import ChatIdentity, RequestState, Team
from relay.models import ChatRoute, SurfaceMessage

DEFAULT_TEAM = "default"


@dataclass(frozen=True)
class Route:
    """Where one team's asks are posted on one chat service, and who there may decide them."""

    channel: str
    approvers: tuple[str, ...]


def chat_route(surface: str, team_id: int, *, default: Route | None) -> Route | None:
    """The team's own route; `default` (the environment's) for the default team; else None."""
    row = ChatRoute.objects.filter(surface=surface, team_id=team_id).first()
    if row is not None:
        return Route(row.channel, tuple(str(a) for a in row.approvers))
    if default is not None and Team.objects.filter(pk=team_id, name=DEFAULT_TEAM).exists():
        return default
    return None


def user_for_chat(provider: str, external_id: str) -> Any:
    """The active Gatehouse user whose link to this chat account is proven, or None."""
    identity = (
        ChatIdentity.objects.select_related("user")
        .filter(provider=provider, external_id=external_id, user__is_active=True, proven_at__isnull=False)
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


def chat_routes_of(team: Team, *, defaults: dict[str, Route | None]) -> list[dict[str, Any]]:
    """Each service's route for a team as the API shows it, saying where it comes from."""
    rows = {row.surface: row for row in ChatRoute.objects.filter(team=team)}
    shown = []
    for surface in ChatRoute.Surface.values:
        row = rows.get(surface)
        default = defaults.get(surface)
        if row is not None:
            shown.append({"surface": surface, "channel": row.channel, "approvers": row.approvers, "from": "team"})
        elif default is not None and team.name == DEFAULT_TEAM:
            route = {"channel": default.channel, "approvers": list(default.approvers), "from": "environment"}
            shown.append({"surface": surface, **route})
    return shown
