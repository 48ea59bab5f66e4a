"""The relay's reads that `approvals.selectors` has no reason to know about."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import ForeignKey, Model
from django.db.models.sql import Query

from approvals import services
from approvals.models import Agent, Decision, PermissionRequest, PersonalToken, Team


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


def request_for_card(request_id: Any) -> PermissionRequest | None:
    """The request with its agent, team and (once decided) decision, in one statement.

    Every process with a dashboard open reads each announced request once, so this is
    on the path of every call. The statement is written out once per process from the
    models' own fields (`_CardRead`): what `select_related("agent", "team", "decision")`
    returns, without compiling that query again for every call.
    """
    request_uuid = request_id if isinstance(request_id, uuid.UUID) else parse_request_id(request_id)
    if request_uuid is None:
        return None
    return _card_read(connection.vendor).one(request_uuid)


def team_roles(team_id: int) -> dict[int, str]:
    """Every member of the team with their role: user id -> "admin" | "approver" | "viewer"."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT user_id, role FROM approvals_membership WHERE team_id = %s", [team_id])
        return {user_id: role for user_id, role in cursor.fetchall()}


@dataclass(frozen=True)
class _Part:
    """One model's columns in the card's row: where they start, and the fields they fill."""

    model: type[Model]
    start: int
    fields: tuple[Any, ...]

    @property
    def names(self) -> list[str]:
        return [f.attname for f in self.fields]

    @property
    def pk(self) -> int:
        return self.fields.index(self.model._meta.pk)

    def values(self, row: list[Any]) -> list[Any]:
        return row[self.start : self.start + len(self.fields)]


class _CardRead:
    """`request_for_card`'s statement and how its row becomes models, built once per process.

    The columns are every concrete field of the request, its agent, its team and its
    decision, in the models' order; each value passes through the converters the ORM
    itself applies (`SQLCompiler.get_converters`, as `RawQuerySet` does), so a UUID,
    a JSON field or a SQLite date comes back as the ORM would return it.
    """

    def __init__(self) -> None:
        quote = connection.ops.quote_name
        models: list[tuple[type[Model], str]] = [
            (PermissionRequest, "r"),
            (Agent, "a"),
            (Team, "t"),
            (Decision, "d"),
        ]
        columns: list[str] = []
        self.parts: list[_Part] = []
        cols: list[Any] = []
        for model, alias in models:
            fields = tuple(model._meta.concrete_fields)
            self.parts.append(_Part(model, len(columns), fields))
            columns += [f"{alias}.{quote(f.column)}" for f in fields]
            cols += [f.get_col(model._meta.db_table) for f in fields]
        table = {model: quote(model._meta.db_table) for model, _ in models}
        # Every name comes from the models' own metadata, quoted; the one value is a parameter.
        self.sql = (
            f"SELECT {', '.join(columns)} FROM {table[PermissionRequest]} r"  # noqa: S608
            f" JOIN {table[Agent]} a ON a.id = r.agent_id"
            f" JOIN {table[Team]} t ON t.id = r.team_id"
            f" LEFT JOIN {table[Decision]} d ON d.id = r.decision_id"
            " WHERE r.id = %s"
        )
        self.compiler = connection.ops.compiler("SQLCompiler")(Query(PermissionRequest), connection, connection.alias)
        self.converters = self.compiler.get_converters(cols)
        self.pk = PermissionRequest._meta.pk
        self.relations: list[ForeignKey[Any, Any]] = [
            PermissionRequest.agent.field,
            PermissionRequest.team.field,
            PermissionRequest.decision.field,
        ]

    def one(self, request_id: uuid.UUID) -> PermissionRequest | None:
        with connection.cursor() as cursor:
            cursor.execute(self.sql, [self.pk.get_db_prep_value(request_id, connection)])
            rows: Iterator[Any] = iter(cursor.fetchall())
        if self.converters:
            rows = self.compiler.apply_converters(rows, self.converters)
        row = next(rows, None)
        if row is None:
            return None
        row = list(row)
        request_part, *related = self.parts
        request = PermissionRequest.from_db(connection.alias, request_part.names, request_part.values(row))
        for field, part in zip(self.relations, related, strict=True):
            values = part.values(row)
            # A pending request joins no decision: its columns are all NULL.
            value = None if values[part.pk] is None else part.model.from_db(connection.alias, part.names, values)
            field.set_cached_value(request, value)
        return request


@functools.cache
def _card_read(vendor: str) -> _CardRead:
    # Keyed by the engine: a process talks to one database, but the tests switch it.
    return _CardRead()
