"""The denials monitor: every number is a database aggregate."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import connections
from django.db.models import Aggregate, Count, FloatField, Q, QuerySet
from django.db.models.functions import Length, TruncDay, TruncHour
from django.db.models.lookups import GreaterThan, LessThanOrEqual

from approvals import permissions
from approvals.models import (
    INDEXED_RULE_CHARS,
    STEP_REASON_TYPES,
    Agent,
    Decision,
    SessionDenials,
    Team,
)


def _team_decisions(user: User | AnonymousUser, since: datetime) -> QuerySet[Decision]:
    teams = permissions.team_ids_for(user)
    if teams is None:
        # Name every team even for a superuser: the monitor's indexes lead with the team.
        teams = list(Team.objects.values_list("pk", flat=True))
    return Decision.objects.filter(team_id__in=teams, created_at__gte=since)


def _denials(user: User | AnonymousUser, since: datetime) -> list[QuerySet[Decision]]:
    """The denials since `since` in two parts, each read from its index alone.

    - Combine a query over both with `union(all=True)` and sum what it counted.
    """
    denied = _team_decisions(user, since).filter(behavior="deny")
    rule_chars = Length("rule")
    return [
        denied.filter(LessThanOrEqual(rule_chars, INDEXED_RULE_CHARS)),
        denied.filter(GreaterThan(rule_chars, INDEXED_RULE_CHARS)),
    ]


# What denied a call, as the monitor splits it; any other reason type counts as "other".
DENIAL_CAUSES = {"rule": "rule", "user": "person", "timeout": "timeout", "safetyCheck": "safety check"}
CAUSE_ORDER = (*DENIAL_CAUSES.values(), "other")


def denials_over_time(
    user: User | AnonymousUser, since: datetime, *, hourly: bool = False
) -> list[tuple[datetime, str, int]]:
    """Denials per day (or hour, in the active time zone) and cause since `since`, oldest first."""
    bucket = TruncHour("created_at") if hourly else TruncDay("created_at")
    short, long = (
        part.annotate(bucket=bucket).values_list("bucket", "reason_type").annotate(n=Count("*")).order_by()
        for part in _denials(user, since)
    )
    counts: Counter[tuple[datetime, str]] = Counter()
    for moment, reason_type, n in short.union(long, all=True):
        counts[(moment, DENIAL_CAUSES.get(reason_type, "other"))] += n
    return sorted(
        ((moment, cause, n) for (moment, cause), n in counts.items()),
        key=lambda item: (item[0], CAUSE_ORDER.index(item[1])),
    )


def decision_period(user: User | AnonymousUser, since: datetime, until: datetime) -> dict[str, Any]:
    """All decisions and denials between `since` and `until`, denials split by cause, in one query."""
    counts = (
        _team_decisions(user, since)
        .filter(created_at__lt=until)
        .values_list("behavior", "reason_type")
        .annotate(n=Count("*"))
        .order_by()
    )
    decided = 0
    causes: Counter[str] = Counter({cause: 0 for cause in CAUSE_ORDER})
    for behavior, reason_type, n in counts:
        if reason_type in STEP_REASON_TYPES:
            continue  # a quorum vote or a ladder step: on the way to a decision, not one
        decided += n
        if behavior == "deny":
            causes[DENIAL_CAUSES.get(reason_type, "other")] += n
    denied = sum(causes.values())
    return {"decided": decided, "denied": denied, "rate": denied / decided if decided else None, "causes": causes}


DENIAL_DIMENSIONS = {"tool": "tool_name", "agent": "agent_id", "rule": "rule", "decider": "decided_by"}


def denials_top(user: User | AnonymousUser, since: datetime, limit: int = 8) -> dict[str, list[tuple[str, int]]]:
    """The top denied tools, agents, rules and deciders since `since`, in one query.

    - One GROUP BY over the combinations that occur, summed per dimension here: they are
      few (tools x agents x rules x deciders seen), the denied rows many.
    """
    short, long = (
        part.values_list(*DENIAL_DIMENSIONS.values()).annotate(n=Count("*")).order_by()
        for part in _denials(user, since)
    )
    totals: dict[str, Counter[Any]] = {dimension: Counter() for dimension in DENIAL_DIMENSIONS}
    for *keys, n in short.union(long, all=True):
        for dimension, key in zip(DENIAL_DIMENSIONS, keys, strict=True):
            totals[dimension][key] += n
    # Counted by agent id (what the index holds), shown by name as before: merged by name.
    names = dict(Agent.objects.filter(pk__in=list(totals["agent"])).values_list("pk", "name"))
    by_name: Counter[Any] = Counter()
    for agent_id, n in totals["agent"].items():
        by_name[names[agent_id]] += n
    totals["agent"] = by_name
    totals["rule"].pop("", None)
    return {
        dimension: sorted(((str(key), n) for key, n in counts.items()), key=lambda item: (-item[1], item[0]))[:limit]
        for dimension, counts in totals.items()
    }


class _PercentileCont(Aggregate):
    """PostgreSQL's percentile_cont: the percentile of a column, interpolated, in one pass."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: str, fraction: float, **extra: Any) -> None:
        super().__init__(expression, fraction=float(fraction), **extra)


def human_decision_stats(user: User | AnonymousUser, since: datetime) -> dict[str, Any]:
    """How long people took to answer (median, p90) and how many asks timed out."""
    asked = _team_decisions(user, since).filter(reason_type__in=["user", "timeout"])
    human = Q(reason_type="user")
    # Counts of reason_type, not of id: the index the monitor reads holds no id.
    aggregates: dict[str, Aggregate] = {
        "humans": Count("reason_type", filter=human),
        "timeouts": Count("reason_type", filter=Q(reason_type="timeout")),
    }
    in_database = connections[asked.db].vendor == "postgresql"
    if in_database:
        aggregates["median_ms"] = _PercentileCont("latency_ms", 0.5, filter=human)
        aggregates["p90_ms"] = _PercentileCont("latency_ms", 0.9, filter=human)
    stats = asked.aggregate(**aggregates)
    if not in_database:
        # SQLite has no percentile_cont: the same interpolation from at most two rows each.
        latencies = asked.filter(human).order_by("latency_ms").values_list("latency_ms", flat=True)
        stats["median_ms"] = _percentile(latencies, stats["humans"], 0.5)
        stats["p90_ms"] = _percentile(latencies, stats["humans"], 0.9)
    total = stats["humans"] + stats["timeouts"]
    stats["timeout_rate"] = stats["timeouts"] / total if total else None
    return stats


def _percentile(ordered: QuerySet[Decision, float], count: int, fraction: float) -> float | None:
    """percentile_cont over `count` ordered values, reading only the two around the rank."""
    if count == 0:
        return None
    rank = fraction * (count - 1)
    below = int(rank)
    values = list(ordered[below : below + 2])
    if len(values) == 1 or rank == below:
        return values[0]
    return values[0] + (values[1] - values[0]) * (rank - below)


def sessions_in_denial_loops(user: User | AnonymousUser, since: datetime, *, limit: int = 20) -> list[dict[str, Any]]:
    """Sessions whose engine denial counter reached the limit, newest first."""
    teams = permissions.team_ids_for(user)
    rows = SessionDenials.objects.select_related("agent").filter(
        updated_at__gte=since, state__count__gte=settings.GATEHOUSE_DENIAL_LIMIT
    )
    if teams is not None:
        rows = rows.filter(agent__team_id__in=teams)
    return [
        {
            "agent": row.agent.name,
            "session_id": row.session_id,
            "count": row.state.get("count", 0),
            "key": row.state.get("key") or "",
            "updated_at": row.updated_at,
        }
        for row in rows.order_by("-updated_at")[:limit]
    ]
