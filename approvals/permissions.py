"""Who may see, decide and manage what: the one place a person's team roles are checked.

Views, the API, the sockets and the chat bridges ask here; none checks a role inline.
Roles are ranked per team: a viewer sees the team's requests, an approver also decides
them, an admin also manages the team (its people, its settings, its stop switch). A
superuser is above every team: an admin of all of them without being a member.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.http import Http404

from approvals import selectors
from approvals.models import Membership, PermissionRequest, Role

# Each role includes every power of the roles ranked below it.
RANK: dict[str, int] = {Role.VIEWER: 0, Role.APPROVER: 1, Role.ADMIN: 2}


def at_least(role: str | None, needed: str) -> bool:
    """Whether `role` (None: no role) carries the powers of `needed`."""
    return role is not None and RANK.get(role, -1) >= RANK[needed]


def _roles_from(needed: str) -> list[str]:
    return [role for role, rank in RANK.items() if rank >= RANK[needed]]


def team_ids_for(user: User | AnonymousUser, *, role: str | None = None) -> list[int] | None:
    """The teams a person may see, or where they hold at least `role`; None means all.

    - `role=Role.APPROVER` is where they may decide (admins decide too);
      `role=Role.ADMIN` is where they manage the team.
    """
    if not user.is_authenticated or not user.is_active:
        return []
    if user.is_superuser:
        return None
    memberships = Membership.objects.filter(user=user)
    if role is not None:
        memberships = memberships.filter(role__in=_roles_from(role))
    return list(memberships.values_list("team_id", flat=True))


def role_in(user: User | AnonymousUser, team_id: int) -> str | None:
    """The person's role in one team (`admin` for a superuser), or None outside it."""
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.ADMIN
    return selectors.membership_role(user.pk, team_id)


def role_among(user: Any, roles: Mapping[int, str]) -> str | None:
    """`role_in` against a team's memberships read beforehand (user id -> role), no query.

    - For code that checks many people against one team at once (a pushed card), and a
      decision's checks on the members read with its request (`request_and_role`).
    """
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    return Role.ADMIN if user.is_superuser else roles.get(user.pk)


def can_decide(user: User | AnonymousUser, request: PermissionRequest) -> bool:
    return at_least(role_in(user, request.team_id), Role.APPROVER)


def can_see(user: User | AnonymousUser, team_id: int) -> bool:
    return role_in(user, team_id) is not None


def can_manage_team(user: User | AnonymousUser, team_id: int) -> bool:
    """Whether a person may write the team's rules and register or revoke its agents (approvers and up)."""
    return at_least(role_in(user, team_id), Role.APPROVER)


def is_team_admin(user: User | AnonymousUser, team_id: int) -> bool:
    """Whether the person manages this team: its people, settings and stop switch."""
    return at_least(role_in(user, team_id), Role.ADMIN)


def is_approver_anywhere(user: User | AnonymousUser) -> bool:
    teams = team_ids_for(user, role=Role.APPROVER)
    return teams is None or bool(teams)


def is_admin_anywhere(user: User | AnonymousUser) -> bool:
    teams = team_ids_for(user, role=Role.ADMIN)
    return teams is None or bool(teams)


def request_and_role(
    user: User | AnonymousUser, request_id: uuid.UUID, rows: list[list[tuple[Any, ...]]] | None = None
) -> tuple[PermissionRequest | None, str | None]:
    """The request if this person may see it, and their role in its team; (None, None) otherwise.

    - One read of the request and its team's members (`selectors.request_and_members`)
      serves every check a decision makes: `rows`, what its statements returned (with a
      person's token read, `approvals.auth`), or a read now.
    """
    if not user.is_authenticated:
        return None, None
    found, members = selectors.request_and_members(request_id, rows)
    role = role_among(user, members) if found is not None else None
    return (found, role) if role is not None else (None, None)


def visible_request_or_404(user: User | AnonymousUser, request_id: Any) -> PermissionRequest:
    """The request if this person may see it; 404 otherwise, so the ids of others do not leak."""
    found = selectors.request_get(request_id)
    if found is None or not can_see(user, found.team_id):
        raise Http404("No such request.")
    return found
