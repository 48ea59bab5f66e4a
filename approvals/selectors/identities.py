"""Reads of agents, tokens, teams and people."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from approvals import permissions
from approvals.models import (
    Agent,
    ChatIdentity,
    Membership,
    Pause,
    PersonalToken,
    Role,
    Team,
    TeamSettings,
)
from approvals.written import JoinedRead, Statement, column, run_together, table

_AGENT_BY_TOKEN = JoinedRead(Agent, relations=("team",), match=("token_hash",), also="t0.revoked_at IS NULL")
# The digest is unique: the token's expiry is checked on the one row it names.
_PERSONAL_TOKEN = JoinedRead(PersonalToken, relations=("user",), match=("token_hash",), also="t0.revoked_at IS NULL")


def agent_by_token_hash(
    digest: str, also: Sequence[Statement] = ()
) -> tuple[Agent | None, list[list[tuple[Any, ...]]]]:
    """The live agent a token's digest names, with its team (read on every call an agent
    makes); and the rows of `also`, statements sent with it in the same round trip
    (`approvals.auth`: what the view will read first)."""
    [found, *rows] = run_together([_AGENT_BY_TOKEN.first_statement(digest), *also])
    return next(iter(_AGENT_BY_TOKEN.instances(found)), None), rows


def personal_token_by_hash(
    digest: str, also: Sequence[Statement] = ()
) -> tuple[PersonalToken | None, list[list[tuple[Any, ...]]]]:
    """A live personal token, with its person: not revoked, not expired (read on every call a
    person makes); and the rows of `also`, statements sent with it in the same round trip
    (`approvals.auth`: what the view will read first)."""
    [found, *rows] = run_together([_PERSONAL_TOKEN.first_statement(digest), *also])
    token = next(iter(_PERSONAL_TOKEN.instances(found)), None)
    if token is None or (token.expires_at is not None and token.expires_at <= timezone.now()):
        return None, rows
    return token, rows


def membership_role(user_id: int, team_id: int) -> str | None:
    """A person's role in a team as their membership says; None without one (`permissions.role_in` asks)."""
    [rows] = run_together([(_role_sql(connection.vendor), [user_id, team_id])])
    return rows[0][0] if rows else None


# A membership is unique per person and team: one row or none.
@functools.cache
def _role_sql(vendor: str) -> str:
    # Every name comes from the model, quoted; the values are parameters.
    return (
        f"SELECT {column(Membership, 'role')} FROM {table(Membership)}"  # noqa: S608
        f" WHERE {column(Membership, 'user')} = %s AND {column(Membership, 'team')} = %s"
    )


def personal_tokens_of(user: Any) -> QuerySet[PersonalToken]:
    return PersonalToken.objects.filter(user=user).order_by("-created_at")


def agent_in_team(*, team_id: int, name: str) -> Agent | None:
    return Agent.objects.filter(team_id=team_id, name=name).first()


def deferred_timeout(team_id: int) -> int:
    """A deferred headless ask's deadline, in seconds: the team's, else `GATEHOUSE_DEFERRED_TIMEOUT`."""
    return int(team_settings(team_id).deferred_timeout or settings.GATEHOUSE_DEFERRED_TIMEOUT)


def team_settings(team_id: int) -> TeamSettings:
    """The team's approval settings; the defaults (unsaved) when a team admin never set them."""
    return TeamSettings.objects.filter(team_id=team_id).first() or TeamSettings(team_id=team_id)


def team_groups(team_id: int) -> dict[str, list[str]]:
    """Each named group of the team ("leads", "on_call") and its members' user names."""
    groups: dict[str, list[str]] = {}
    rows = Membership.objects.filter(team_id=team_id).select_related("user").order_by("user__username")
    for membership in rows:
        for group in membership.groups or []:
            groups.setdefault(str(group), []).append(membership.user.get_username())
    return dict(sorted(groups.items()))


def team_by_name(name: str) -> Team | None:
    return Team.objects.filter(name=name).first()


def teams_for(user: User | AnonymousUser) -> QuerySet[Team]:
    teams = permissions.team_ids_for(user)
    return Team.objects.all() if teams is None else Team.objects.filter(pk__in=teams)


def agents_visible_to(user: User | AnonymousUser) -> QuerySet[Agent]:
    teams = permissions.team_ids_for(user)
    agents = Agent.objects.select_related("team", "owner").order_by("revoked_at", "name")
    return agents if teams is None else agents.filter(team_id__in=teams)


def teams_deciding(user: User | AnonymousUser) -> QuerySet[Team]:
    """The teams in which a person may decide, write rules and register agents."""
    teams = permissions.team_ids_for(user, role=Role.APPROVER)
    return Team.objects.all() if teams is None else Team.objects.filter(pk__in=teams)


def chat_identities_for(user: Any) -> QuerySet[ChatIdentity]:
    return ChatIdentity.objects.filter(user=user).order_by("provider", "external_id")


def teams_administered(user: User | AnonymousUser) -> QuerySet[Team]:
    """The teams whose people, settings and stop switch a person manages."""
    teams = permissions.team_ids_for(user, role=Role.ADMIN)
    found = Team.objects.all() if teams is None else Team.objects.filter(pk__in=teams)
    return found.order_by("name")


def team_members(team: Team) -> QuerySet[Membership]:
    """A team's people with their roles, by name."""
    return Membership.objects.filter(team=team).select_related("user").order_by("user__username")


def member_of(team: Team, user_id: int) -> Membership | None:
    return Membership.objects.filter(team=team, user_id=user_id).select_related("user").first()


def pause_for(agent: Agent) -> Pause | None:
    """The stop switch over this agent (its own or its team's); a deny beats an ask."""
    pauses = list(
        Pause.objects.select_related("created_by").filter(Q(agent__isnull=True) | Q(agent=agent), team_id=agent.team_id)
    )
    return min(pauses, key=lambda p: (p.answer != "deny", p.agent_id is None), default=None)


def pauses_visible_to(user: User | AnonymousUser) -> QuerySet[Pause]:
    teams = permissions.team_ids_for(user)
    pauses = Pause.objects.select_related("team", "agent", "created_by").order_by("team__name", "agent__name")
    return pauses if teams is None else pauses.filter(team_id__in=teams)
