"""The relay's reads that `approvals.selectors` has no reason to know about."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Collection
from typing import Any

from django.db import connection

from approvals import services
from approvals.models import Agent, Membership, PermissionRequest, PersonalToken
from approvals.written import JoinedRead


def token_is_revoked(token: str) -> bool:
    """True when the token belongs to a revoked agent or personal token (not merely unknown)."""
    digest = services.token_hash(token)
    return (
        Agent.objects.filter(token_hash=digest, revoked_at__isnull=False).exists()
        or PersonalToken.objects.filter(token_hash=digest, revoked_at__isnull=False).exists()
    )


def parse_request_id(value: Any) -> uuid.UUID | None:
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def agent_request(agent_id: int, request_id: uuid.UUID) -> PermissionRequest | None:
    """The agent's own request, or None (another agent's request is 'not found' too)."""
    return PermissionRequest.objects.select_related("agent", "team").filter(pk=request_id, agent_id=agent_id).first()


def agent_request_with_decision(agent_id: int, request_id: uuid.UUID) -> PermissionRequest | None:
    """The agent's own request with its decision (if any) in one query, for frames that depend on the outcome."""
    return PermissionRequest.objects.select_related("decision").filter(pk=request_id, agent_id=agent_id).first()


_CARD = JoinedRead(PermissionRequest, relations=("agent", "team", "decision"), match=("id",))


def requests_for_cards(request_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, PermissionRequest]:
    """The requests of these ids that exist, each with its agent, team and (once decided)
    decision, in one statement.

    Every process with a dashboard open reads each announced request, so this is on the
    path of every call: a statement written out once per process (`approvals.written`)
    returns what `select_related("agent", "team", "decision")` returns, without compiling
    that query for every call. The cards of one tick's calls decided at submit are read
    together (relay.fanout).
    """
    return {request.pk: request for request in _CARD.each(request_ids)}


def teams_roles(team_ids: Collection[int]) -> dict[int, dict[int, str]]:
    """Every member of each of these teams with their role: team id -> user id -> "admin" | "approver" | "viewer".

    - A team without members maps to {}.
    """
    teams: dict[int, dict[int, str]] = {team_id: {} for team_id in team_ids}
    if not teams:
        return teams
    with connection.cursor() as cursor:
        cursor.execute(_teams_roles_sql(connection.vendor, len(teams)), list(teams))
        for team_id, user_id, role in cursor.fetchall():
            teams[team_id][user_id] = role
    return teams


@functools.lru_cache(maxsize=64)
def _teams_roles_sql(vendor: str, teams: int) -> str:
    """Written out once per process, engine and number of teams, from the model's names (approvals.written)."""
    meta, quote = Membership._meta, connection.ops.quote_name
    columns = {f.name: quote(str(f.column)) for f in meta.concrete_fields}
    user, role, team = columns["user"], columns["role"], columns["team"]
    placeholders = ", ".join(["%s"] * teams)
    return f"SELECT {team}, {user}, {role} FROM {quote(meta.db_table)} WHERE {team} IN ({placeholders})"  # noqa: S608
