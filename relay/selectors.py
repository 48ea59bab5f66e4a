"""The relay's reads that `approvals.selectors` has no reason to know about."""

from __future__ import annotations

import functools
import uuid
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


def request_for_card(request_id: Any) -> PermissionRequest | None:
    """The request with its agent, team and (once decided) decision, in one statement.

    Every process with a dashboard open reads each announced request once, so this is
    on the path of every call: a statement written out once per process
    (`approvals.written`) returns what `select_related("agent", "team",
    "decision")` returns, without compiling that query for every call.
    """
    request_uuid = request_id if isinstance(request_id, uuid.UUID) else parse_request_id(request_id)
    if request_uuid is None:
        return None
    return _CARD.first(request_uuid)


def team_roles(team_id: int) -> dict[int, str]:
    """Every member of the team with their role: user id -> "admin" | "approver" | "viewer"."""
    with connection.cursor() as cursor:
        cursor.execute(_team_roles_sql(connection.vendor), [team_id])
        return {user_id: role for user_id, role in cursor.fetchall()}


@functools.cache
def _team_roles_sql(vendor: str) -> str:
    """Written out once per process and engine, from the model's names (approvals.written)."""
    meta, quote = Membership._meta, connection.ops.quote_name
    columns = {f.name: quote(str(f.column)) for f in meta.concrete_fields}
    user, role, team = columns["user"], columns["role"], columns["team"]
    return f"SELECT {user}, {role} FROM {quote(meta.db_table)} WHERE {team} = %s"  # noqa: S608
