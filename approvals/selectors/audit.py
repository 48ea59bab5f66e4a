"""Reads of the audit log: its rows as the page and API filter them, and one row's chain link."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import connections
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from approvals import permissions
from approvals.audit_search import FTS_MATCH, fold, fts_phrase, fts_serves
from approvals.models import (
    Decision,
    SavedAuditFilter,
)


def audit_rows(filters: dict[str, Any], user: User | AnonymousUser) -> QuerySet[Decision]:
    """The audit log filtered as the API and the audit page allow, newest first."""
    teams = permissions.team_ids_for(user)
    # The list shows the agent's name and the call's input: the request's engine trace
    # and tool result can be large, and are read on the detail page only.
    rows = Decision.objects.select_related("agent", "request").defer(
        "request__evaluation", "request__result", "request__permission_suggestions"
    )
    if teams is not None:
        rows = rows.filter(team_id__in=teams)
    lookups = {
        "agent": "agent__name",
        "session": "session_id",
        "tool": "tool_name",
        "behavior": "behavior",
        "reason_type": "reason_type",
        "rule": "rule",
        "decided_by": "decided_by",
        "surface": "surface",
        "since": "created_at__gte",
        "until": "created_at__lt",
    }
    for key, lookup in lookups.items():
        value = filters.get(key)
        if value not in (None, ""):
            rows = rows.filter(**{lookup: value})
    query = filters.get("q")
    if query:
        # Both sides folded in Python, then a plain substring LIKE (with % and _ escaped):
        # the same hits on SQLite and PostgreSQL (approvals.audit_search). SQLite answers
        # 3 or more characters from its FTS5 trigram table, with the same hits.
        folded = fold(query)
        if fts_serves(connections[rows.db], folded):
            rows = rows.filter(id__in=RawSQL(FTS_MATCH, [fts_phrase(folded)]))  # noqa: S611 - constant SQL
        else:
            rows = rows.filter(search__text__contains=folded)
    return rows.order_by("-id")


def audit_row_get(decision_id: int, user: User | AnonymousUser) -> Decision | None:
    teams = permissions.team_ids_for(user)
    rows = Decision.objects.select_related("agent", "request", "team", "decided_by_user").filter(pk=decision_id)
    return (rows if teams is None else rows.filter(team_id__in=teams)).first()


def audit_neighbour_hash_ok(decision: Decision) -> bool:
    """Whether the row before this one ends where this row's chain link says it does."""
    from approvals.audit import chain_start

    previous = Decision.objects.filter(pk__lt=decision.pk).order_by("-pk").values_list("hash", flat=True).first()
    return decision.prev_hash == (previous or chain_start())


def saved_audit_filters(user: User | AnonymousUser) -> QuerySet[SavedAuditFilter]:
    """The person's saved audit filters, by name."""
    if not user.is_authenticated:
        return SavedAuditFilter.objects.none()
    return SavedAuditFilter.objects.filter(user_id=user.pk).order_by("name")
