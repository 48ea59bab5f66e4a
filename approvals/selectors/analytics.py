"""Approver analytics: how each person decides (time to decision, approval rate, rubber stamps).

The percentiles are computed here, in Python, from each person's latencies, with the
same linear interpolation as PostgreSQL's `percentile_cont`: so SQLite and PostgreSQL
give the same numbers to the millisecond (`tests/approvals/test_approver_analytics.py`
runs on both).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models.fields.json import KeyTextTransform

from approvals import permissions
from approvals.models import Decision

# A decision on a destructive card faster than this is a rubber-stamp signal: too quick
# to have read what `rm -rf`, `git push --force` or `DROP TABLE` would do.
RUBBER_STAMP_MS = 2_000.0


@dataclass(frozen=True)
class ApproverStats:
    user: str
    decisions: int
    allowed: int
    denied: int
    approval_rate: float
    median_ms: float
    p90_ms: float
    destructive_decisions: int
    destructive_under_2s: int
    destructive_allowed_under_2s: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(ordered: list[float], fraction: float) -> float:
    """percentile_cont of a non-empty ascending list: linear between the two nearest ranks."""
    rank = fraction * (len(ordered) - 1)
    below = int(rank)
    if below + 1 >= len(ordered) or rank == below:
        return ordered[below]
    return ordered[below] + (ordered[below + 1] - ordered[below]) * (rank - below)


def approver_stats(
    user: User | AnonymousUser, since: datetime, until: datetime, *, team_id: int | None = None
) -> list[ApproverStats]:
    """Per person who decided asks of the viewer's teams in [since, until): slowest median first."""
    rows = Decision.objects.filter(
        reason_type="user", decided_by_user__isnull=False, created_at__gte=since, created_at__lt=until
    )
    teams = permissions.team_ids_for(user)
    if teams is not None:
        rows = rows.filter(team_id__in=teams)
    if team_id is not None:
        rows = rows.filter(team_id=team_id)
    # The card's destructive warning as text: NULL when there was none, and a JSON null
    # reads as NULL on PostgreSQL but as 'null' on SQLite, so both count as none.
    destructive_warning = KeyTextTransform("destructive_warning", "request__evaluation")
    per_person: dict[str, list[tuple[float, bool, bool]]] = defaultdict(list)
    for name, behavior, latency, destructive in rows.values_list(
        "decided_by_user__username", "behavior", "latency_ms", destructive_warning
    ).order_by():
        per_person[name].append((float(latency), behavior == "allow", destructive not in (None, "", "null")))
    found = [_stats(name, decisions) for name, decisions in per_person.items()]
    return sorted(found, key=lambda s: (-s.median_ms, s.user))


def _stats(name: str, decisions: list[tuple[float, bool, bool]]) -> ApproverStats:
    latencies = sorted(latency for latency, _, _ in decisions)
    allowed = sum(1 for _, allow, _ in decisions if allow)
    destructive = [(latency, allow) for latency, allow, is_destructive in decisions if is_destructive]
    fast = [allow for latency, allow in destructive if latency < RUBBER_STAMP_MS]
    return ApproverStats(
        user=name,
        decisions=len(decisions),
        allowed=allowed,
        denied=len(decisions) - allowed,
        approval_rate=round(allowed / len(decisions), 4),
        median_ms=round(percentile(latencies, 0.5), 3),
        p90_ms=round(percentile(latencies, 0.9), 3),
        destructive_decisions=len(destructive),
        destructive_under_2s=len(fast),
        destructive_allowed_under_2s=sum(1 for allow in fast if allow),
    )
