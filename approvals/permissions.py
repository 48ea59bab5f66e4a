"""Who may see and decide what: the one place a person's team roles are checked.

Views, the API, the sockets and the chat bridges ask here; none checks a role inline.
A person sees their teams' requests and decides them only as an approver; a superuser
is above every team.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.http import Http404

from approvals import selectors
from approvals.models import Membership, PermissionRequest, Role


def team_ids_for(user: User | AnonymousUser, *, role: str | None = None) -> list[int] | None:
    """The teams a person may see (or decide in, with role=approver); None means all."""
    if not user.is_authenticated or not user.is_active:
        return []
    if user.is_superuser:
        return None
    memberships = Membership.objects.filter(user=user)
    if role is not None:
        memberships = memberships.filter(role=role)
    return list(memberships.values_list("team_id", flat=True))


def role_in(user: User | AnonymousUser, team_id: int) -> str | None:
    """The person's role in one team (`approver` for a superuser), or None outside it."""
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.APPROVER
    return Membership.objects.filter(user=user, team_id=team_id).values_list("role", flat=True).first()


def role_among(user: Any, roles: Mapping[int, str]) -> str | None:
    """`role_in` against a team's memberships read beforehand (user id -> role), no query.

    - For code that checks many people against one team at once (a pushed card).
    """
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    return Role.APPROVER if user.is_superuser else roles.get(user.pk)


def can_decide(user: User | AnonymousUser, request: PermissionRequest) -> bool:
    return role_in(user, request.team_id) == Role.APPROVER


def can_see(user: User | AnonymousUser, team_id: int) -> bool:
    return role_in(user, team_id) is not None


def can_manage_team(user: User | AnonymousUser, team_id: int) -> bool:
    """Whether a person may write the team's rules and register or revoke its agents."""
    teams = team_ids_for(user, role=Role.APPROVER)
    return teams is None or team_id in teams


def is_approver_anywhere(user: User | AnonymousUser) -> bool:
    teams = team_ids_for(user, role=Role.APPROVER)
    return teams is None or bool(teams)


def visible_request_or_404(user: User | AnonymousUser, request_id: Any) -> PermissionRequest:
    """The request if this person may see it; 404 otherwise, so the ids of others do not leak."""
    found = selectors.request_get(request_id)
    if found is None or not can_see(user, found.team_id):
        raise Http404("No such request.")
    return found
