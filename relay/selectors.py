"""The relay's reads that `approvals.selectors` has no reason to know about."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Collection, Sequence
from typing import Any

from django.db import connection

from approvals import services
from approvals.models import Agent, Membership, PermissionRequest, PersonalToken
from approvals.selectors.requests import REQUEST_WITH_DECISION, allowed_like_statement, keep_allowed_like
from approvals.written import Statement, column, run_together, table


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


_CARD = REQUEST_WITH_DECISION


def requests_for_cards(
    request_ids: Collection[uuid.UUID], *, asked: Collection[uuid.UUID] = ()
) -> tuple[dict[uuid.UUID, PermissionRequest], dict[int, dict[int, str]]]:
    """The requests of these ids that exist, each with its agent, team and (once decided)
    decision, and every member of their teams with their role (team id -> user id ->
    "admin" | "approver" | "viewer"; a team without members maps to {}).

    Every process with a dashboard open reads each announced request, so this is on the
    path of every call: statements written out once per process (`approvals.written`),
    the first returning what `select_related("agent", "team", "decision")` returns, sent
    together: one round trip on PostgreSQL. The cards of one tick's calls decided at
    submit are read together (relay.fanout); an ask's, in the ask's own message
    (`cards_statements`).

    - `asked`: the ids announced as asks (their cards are pending ones). Each one's last
      person's allow of a call like it comes in the same message, kept on the request
      for its card (`selectors.last_allowed_like`; a card no longer pending says nothing
      of it).
    """
    if not request_ids:
        return {}, {}
    return cards_read(request_ids, asked, run_together(cards_statements(request_ids, asked=asked)))


def cards_statements(request_ids: Collection[uuid.UUID], *, asked: Collection[uuid.UUID] = ()) -> list[Statement]:
    """`requests_for_cards`'s statements, to send with others (`run_together`); read their
    rows with `cards_read`. `request_ids` must not be empty."""
    ids = [PermissionRequest._meta.pk.get_db_prep_value(request_id, connection) for request_id in request_ids]
    return [
        _CARD.each_statement(request_ids),
        (_roles_sql(connection.vendor, len(ids)), ids),
        *(allowed_like_statement(request_id) for request_id in _asked(request_ids, asked)),
    ]


def cards_read(
    request_ids: Collection[uuid.UUID], asked: Collection[uuid.UUID], results: Sequence[list[tuple[Any, ...]]]
) -> tuple[dict[uuid.UUID, PermissionRequest], dict[int, dict[int, str]]]:
    """What `requests_for_cards` returns, from the rows of `cards_statements(request_ids, asked=asked)`."""
    found, members, *allowed = results
    requests = {request.pk: request for request in _CARD.instances(found)}
    for request_id, rows in zip(_asked(request_ids, asked), allowed, strict=True):
        if request_id in requests:
            keep_allowed_like(requests[request_id], rows)
    teams: dict[int, dict[int, str]] = {request.team_id: {} for request in requests.values()}
    for team_id, user_id, role in members:
        if team_id in teams:  # not a team of a request committed between the two statements
            teams[team_id][user_id] = role
    return requests, teams


def _asked(request_ids: Collection[uuid.UUID], asked: Collection[uuid.UUID]) -> list[uuid.UUID]:
    return [request_id for request_id in asked if request_id in request_ids]


@functools.lru_cache(maxsize=64)
def _roles_sql(vendor: str, requests: int) -> str:
    """The memberships of the requests' teams: written out once per process, engine and
    number of requests, from the models' names (approvals.written)."""
    team, user, role = (column(Membership, name) for name in ("team", "user", "role"))
    request_team, request_id = column(PermissionRequest, "team"), column(PermissionRequest, "id")
    placeholders = ", ".join(["%s"] * requests)
    return (
        f"SELECT {team}, {user}, {role} FROM {table(Membership)} WHERE {team} IN"  # noqa: S608
        f" (SELECT {request_team} FROM {table(PermissionRequest)} WHERE {request_id} IN ({placeholders}))"
    )
