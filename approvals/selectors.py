"""Every read Gatehouse makes, and the shapes requests and decisions are sent in."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import connections
from django.db.models import Aggregate, Count, FloatField, Q, QuerySet
from django.db.models.functions import Length, TruncDay, TruncHour
from django.db.models.lookups import GreaterThan, LessThanOrEqual
from django.utils import timezone

import policy
from approvals import permissions
from approvals.audit_search import fold
from approvals.engine_input import engine_input, engine_rule_items
from approvals.models import (
    INDEXED_RULE_CHARS,
    Agent,
    AutopilotSetting,
    ChatIdentity,
    Decision,
    PermissionRequest,
    PersonalToken,
    RequestState,
    Role,
    Rule,
    RuleScope,
    RuleSource,
    RulesVersion,
    SessionDenials,
    Team,
)
from policy import grants

# --- identity ---------------------------------------------------------------------------


def agent_by_token_hash(digest: str) -> Agent | None:
    return Agent.objects.select_related("team").filter(token_hash=digest, revoked_at__isnull=True).first()


def personal_token_by_hash(digest: str) -> PersonalToken | None:
    """A live personal token: not revoked, not expired."""
    live = Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    return PersonalToken.objects.select_related("user").filter(live, token_hash=digest, revoked_at__isnull=True).first()


def personal_tokens_of(user: Any) -> QuerySet[PersonalToken]:
    return PersonalToken.objects.filter(user=user).order_by("-created_at")


# --- requests ---------------------------------------------------------------------------


def request_by_tool_use_id(*, agent: Agent, tool_use_id: str) -> PermissionRequest | None:
    return PermissionRequest.objects.filter(agent=agent, tool_use_id=tool_use_id).first()


def request_get(request_id: Any) -> PermissionRequest | None:
    """The request with this id, or None; a malformed id is simply not found.

    - A database error is not caught here: it reaches the 503 handler.
    """
    try:
        pk = request_id if isinstance(request_id, uuid.UUID) else uuid.UUID(str(request_id))
    except ValueError:
        return None
    return PermissionRequest.objects.select_related("agent", "team").filter(pk=pk).first()


def request_matching(*, agent: Agent, session_id: str, tool_name: str, input_hash: str) -> PermissionRequest | None:
    """The newest request of the same session, tool and input (PermissionRequest matching)."""
    return (
        PermissionRequest.objects.filter(agent=agent, session_id=session_id, tool_name=tool_name, input_hash=input_hash)
        .order_by("-created_at")
        .first()
    )


def session_gated_before_use(*, agent: Agent, session_id: str) -> bool:
    """Whether this session's calls reach Gatehouse before they run (a PreToolUse request).

    - Requests opened by a PermissionRequest hook carry a generated `gh_` id, never
      Claude Code's own `tool_use_id`, so they do not count.
    """
    if not session_id:
        return False
    requests = PermissionRequest.objects.filter(agent=agent, session_id=session_id)
    return requests.exclude(tool_use_id__startswith="gh_").exists()


def grant_rule_for(request: PermissionRequest) -> str | None:
    """The rule "Allow for session" / "Always allow" saves for this request; None: once only.

    - Never wider than the call (`policy.grants`); every surface shows it before the tap.
    """
    evaluation = request.evaluation or {}
    suggestions = [str(rule) for rule in evaluation.get("suggested_rules") or []]
    tool_input = request.tool_input if isinstance(request.tool_input, dict) else {}
    destructive = bool(evaluation.get("destructive_warning"))
    return grants.grant_rule(request.tool_name, tool_input, suggestions, destructive=destructive)


def decision_for(request: PermissionRequest) -> Decision | None:
    return Decision.objects.filter(request_id=request.pk).first()


def joined_decision(request: PermissionRequest) -> Decision | None:
    """The decision read with the request (`select_related("decision")`); None while pending."""
    try:
        return request.decision
    except Decision.DoesNotExist:
        return None


def requests_visible_to(user: User | AnonymousUser) -> QuerySet[PermissionRequest]:
    teams = permissions.team_ids_for(user)
    queryset = PermissionRequest.objects.select_related("agent", "team", "decision")
    return queryset if teams is None else queryset.filter(team_id__in=teams)


def pending_requests(user: User | AnonymousUser) -> QuerySet[PermissionRequest]:
    return requests_visible_to(user).filter(state=RequestState.PENDING).order_by("created_at")


def requests_filtered(
    user: User | AnonymousUser,
    *,
    state: str | None = None,
    agent: str | None = None,
    session: str | None = None,
) -> QuerySet[PermissionRequest]:
    """The API's request list: visible to `user`, filtered, newest first."""
    rows = requests_visible_to(user)
    if state:
        rows = rows.filter(state=state)
    if agent:
        rows = rows.filter(agent__name=agent)
    if session:
        rows = rows.filter(session_id=session)
    return rows.order_by("-created_at", "-pk")


def pending_count(agent: Agent) -> int:
    """How many of the agent's asks wait for a person now."""
    return PermissionRequest.objects.filter(agent=agent, state=RequestState.PENDING).count()


def pending_for_agent(agent: Agent) -> QuerySet[PermissionRequest]:
    return PermissionRequest.objects.filter(agent=agent, state=RequestState.PENDING)


def overdue_requests(limit: int = 100) -> QuerySet[PermissionRequest]:
    return (
        PermissionRequest.objects.select_related("agent")
        .filter(state=RequestState.PENDING, deadline_at__lte=timezone.now())
        .order_by("deadline_at")[:limit]
    )


# --- rules ------------------------------------------------------------------------------


def rules_applying_to(*, agent: Agent, session_id: str, cwd: str) -> list[Rule]:
    """The team's rules whose scope covers this agent, project and session, unexpired."""
    return team_rules_applying(team_id=agent.team_id, agent=agent, session_id=session_id, cwd=cwd)


def team_rules_applying(*, team_id: int, agent: Agent | None, session_id: str, cwd: str) -> list[Rule]:
    """`rules_applying_to` for a team; with no agent, agent-scoped rules are left out."""
    return team_rules(team_id).covering(agent_id=agent.pk if agent else None, session_id=session_id, cwd=cwd)


def rules_version(team_id: int) -> str:
    """The team's rules version (see `RulesVersion`); "" before its rules ever changed."""
    return RulesVersion.objects.filter(team_id=team_id).values_list("version", flat=True).first() or ""


@dataclass(frozen=True)
class TeamRules:
    """One team's unexpired rules, indexed by scope, to pick those covering a call in memory.

    Rules that expire after loading stay in; the engine skips expired rules itself.
    """

    version: str
    everyone: list[Rule]
    by_agent: dict[int, list[Rule]]
    by_session: dict[str, list[Rule]]
    project: list[Rule]

    def covering(self, *, agent_id: int | None, session_id: str, cwd: str) -> list[Rule]:
        """Scoped rules (everyone, this agent, this session) by id, then this project's by id."""
        extra: list[Rule] = []
        if agent_id is not None:
            extra += self.by_agent.get(agent_id, [])
        if session_id:
            # A session rule always names its session; one naming an agent is only that agent's.
            extra += [r for r in self.by_session.get(session_id, []) if r.agent_id in (None, agent_id)]
        scoped = sorted(self.everyone + extra, key=lambda r: r.pk) if extra else list(self.everyone)
        return scoped + [r for r in self.project if r.agent_id in (None, agent_id) and _within(cwd, r.project_path)]


def team_rules(team_id: int, version: str = "") -> TeamRules:
    """Every unexpired rule of the team in one query, labelled with the `version` read before it."""
    now = timezone.now()
    rows = Rule.objects.filter(team_id=team_id).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    return indexed_rules(list(rows.order_by("id")), version)


def indexed_rules(rules: list[Rule], version: str = "") -> TeamRules:
    """Rules (saved, or a draft's unsaved ones) indexed by scope, as `team_rules` indexes them."""
    everyone: list[Rule] = []
    by_agent: dict[int, list[Rule]] = {}
    by_session: dict[str, list[Rule]] = {}
    project: list[Rule] = []
    for rule in rules:
        if rule.scope == RuleScope.GLOBAL:
            everyone.append(rule)
        elif rule.scope == RuleScope.AGENT and rule.agent_id is not None:
            by_agent.setdefault(rule.agent_id, []).append(rule)
        elif rule.scope == RuleScope.SESSION and rule.session_id:
            by_session.setdefault(rule.session_id, []).append(rule)
        elif rule.scope == RuleScope.PROJECT:
            project.append(rule)
    return TeamRules(version, everyone, by_agent, by_session, project)


def _within(cwd: str, project_path: str) -> bool:
    root = project_path.rstrip("/")
    return bool(root) and (cwd == root or cwd.startswith(root + "/"))


def rules_visible_to(user: User | AnonymousUser) -> QuerySet[Rule]:
    teams = permissions.team_ids_for(user)
    queryset = Rule.objects.select_related("created_by", "agent", "team")
    return queryset if teams is None else queryset.filter(team_id__in=teams)


def rules_of_team(team_id: int) -> QuerySet[Rule]:
    """Every rule of one team, expired or not, with the agent it names."""
    return Rule.objects.filter(team_id=team_id).select_related("agent").order_by("id")


def autopilot_setting(team: Team) -> AutopilotSetting:
    """The team's autopilot setting; the default (off) when it was never set."""
    return AutopilotSetting.objects.filter(team=team).first() or AutopilotSetting(team=team)


def autopilot_rules(team_ids: list[int] | None) -> QuerySet[Rule]:
    """Unexpired autopilot rules of these teams (None: every team), newest first."""
    now = timezone.now()
    rules = Rule.objects.filter(source=RuleSource.AUTOPILOT).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    rules = rules if team_ids is None else rules.filter(team_id__in=team_ids)
    return rules.select_related("team", "agent", "created_by").order_by("-id")


def autopilot_approvals(user: User | AnonymousUser, limit: int = 20) -> QuerySet[Decision]:
    """The newest calls the autopilot allowed, in the person's teams: its feed."""
    teams = permissions.team_ids_for(user)
    rows = Decision.objects.filter(rule_source=RuleSource.AUTOPILOT)
    rows = rows if teams is None else rows.filter(team_id__in=teams)
    return rows.select_related("agent", "request").order_by("-created_at", "-id")[:limit]


def rule_get(rule_id: int) -> Rule | None:
    return Rule.objects.select_related("created_by", "agent", "team").filter(pk=rule_id).first()


def agent_in_team(*, team_id: int, name: str) -> Agent | None:
    return Agent.objects.filter(team_id=team_id, name=name).first()


def team_by_name(name: str) -> Team | None:
    return Team.objects.filter(name=name).first()


def teams_for(user: User | AnonymousUser) -> QuerySet[Team]:
    teams = permissions.team_ids_for(user)
    return Team.objects.all() if teams is None else Team.objects.filter(pk__in=teams)


# --- payloads ---------------------------------------------------------------------------


def decision_payload(decision: Decision) -> dict[str, Any]:
    """What an agent hears: the decision with its reason."""
    return {
        "id": decision.pk,
        "behavior": decision.behavior,
        "message": decision.message,
        "updated_input": decision.updated_input,
        "reason": decision.reason,
        "decided_by": decision.decided_by,
        "surface": decision.surface,
        "decided_at": decision.created_at.isoformat(),
    }


def request_payload(request: PermissionRequest, decision: Decision | None = None) -> dict[str, Any]:
    if decision is not None and request.state == RequestState.PENDING:
        # The row was read before the decision committed (its state changes in the same
        # transaction as the audit row): re-read it so status and decision agree.
        request.refresh_from_db(fields=["state", "decided_at", "version"])
    evaluation = request.evaluation or {}
    return {
        "id": str(request.pk),
        "status": request.state,
        "agent": request.agent.name,
        "tool_use_id": request.tool_use_id,
        "tool_name": request.tool_name,
        "tool_input": request.tool_input,
        "session_id": request.session_id,
        "cwd": request.cwd,
        "permission_mode": request.permission_mode,
        "context": request.context,
        "created_at": request.created_at.isoformat(),
        "deadline_at": request.deadline_at.isoformat() if request.deadline_at else None,
        "warnings": evaluation.get("warnings", []),
        "destructive_warning": evaluation.get("destructive_warning"),
        "suggested_rules": evaluation.get("suggested_rules", []),
        "permission_suggestions": request.permission_suggestions,
        "decision": decision_payload(decision) if decision is not None else None,
    }


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
        # the same hits on SQLite and PostgreSQL (approvals.audit_search).
        rows = rows.filter(search__text__contains=fold(query))
    return rows.order_by("-id")


# --- dashboard pages (appended by the dashboard) -----------------------------------------


def agents_visible_to(user: User | AnonymousUser) -> QuerySet[Agent]:
    teams = permissions.team_ids_for(user)
    agents = Agent.objects.select_related("team", "owner").order_by("revoked_at", "name")
    return agents if teams is None else agents.filter(team_id__in=teams)


def teams_deciding(user: User | AnonymousUser) -> QuerySet[Team]:
    """The teams in which a person may decide, write rules and register agents."""
    teams = permissions.team_ids_for(user, role=Role.APPROVER)
    return Team.objects.all() if teams is None else Team.objects.filter(pk__in=teams)


def can_manage_team(user: User | AnonymousUser, team_id: int) -> bool:
    teams = permissions.team_ids_for(user, role=Role.APPROVER)
    return teams is None or team_id in teams


def audit_row_get(decision_id: int, user: User | AnonymousUser) -> Decision | None:
    teams = permissions.team_ids_for(user)
    rows = Decision.objects.select_related("agent", "request", "team", "decided_by_user").filter(pk=decision_id)
    return (rows if teams is None else rows.filter(team_id__in=teams)).first()


def audit_neighbour_hash_ok(decision: Decision) -> bool:
    """Whether the row before this one ends where this row's chain link says it does."""
    from approvals.audit import chain_start

    previous = Decision.objects.filter(pk__lt=decision.pk).order_by("-pk").values_list("hash", flat=True).first()
    return decision.prev_hash == (previous or chain_start())


def recently_finished(user: User | AnonymousUser, limit: int = 10) -> QuerySet[PermissionRequest]:
    return requests_visible_to(user).exclude(state=RequestState.PENDING).order_by("-decided_at")[:limit]


def chat_identities_for(user: Any) -> QuerySet[ChatIdentity]:
    return ChatIdentity.objects.filter(user=user).order_by("provider", "external_id")


# --- the denials monitor: every number is a database aggregate --------------------------


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


def denials_over_time(
    user: User | AnonymousUser, since: datetime, *, hourly: bool = False
) -> list[tuple[datetime, int]]:
    """Denials per day (or hour) since `since`, oldest first."""
    bucket = TruncHour("created_at") if hourly else TruncDay("created_at")
    short, long = (
        part.annotate(bucket=bucket).values_list("bucket").annotate(n=Count("*")).order_by()
        for part in _denials(user, since)
    )
    counts: Counter[datetime] = Counter()
    for moment, n in short.union(long, all=True):
        counts[moment] += n
    return sorted(counts.items())


# What denied a call, as the monitor splits it; any other reason type counts as "other".
DENIAL_CAUSES = {"rule": "rule", "user": "person", "timeout": "timeout", "safetyCheck": "safety check"}


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
    causes: Counter[str] = Counter({cause: 0 for cause in (*DENIAL_CAUSES.values(), "other")})
    for behavior, reason_type, n in counts:
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


# --- rules: what the engine would say -----------------------------------------------------


def rules_explain(*, team: Team, agent: Agent | None, call: dict[str, Any]) -> dict[str, Any]:
    """Dry-run the engine on one call with the team's rules, as `explain_call` does; stores nothing."""
    verdict, _ = explain_call(team_id=team.pk, agent=agent, call=call, extra_rules=[])
    return verdict.to_dict()


def rules_lint(rules: list[Rule]) -> list[Any]:
    """Shadowed, duplicated and never-matching rules, from the engine's linter."""
    try:
        from policy.lint import lint_rules
    except ImportError:
        return []
    return list(lint_rules(engine_rule_items(rules)))


# --- explain ----------------------------------------------------------------------------


def explain_call(
    *, team_id: int, agent: Agent | None, call: dict[str, Any], extra_rules: list[dict[str, Any]]
) -> tuple[Any, list[Rule]]:
    """Run the engine as a dry run with the team's rules (plus `extra_rules`); writes nothing.

    - `call` in the submit vocabulary; its input is built as submit builds it
      (`engine_input`), with the agent's registered mode capping the requested one.
    - Pre-decision providers (webhooks, the classifier) are not called: a dry run makes
      no network call on anyone's behalf.
    """
    doc = engine_input(call, registered_mode=agent.default_mode if agent else None)
    rules = team_rules_applying(team_id=team_id, agent=agent, session_id=doc["session_id"], cwd=doc["cwd"])
    compiled = policy.compile_rules(engine_rule_items(rules) + extra_rules)
    return policy.decide(doc, rules=compiled), rules


def rules_filtered(
    user: User | AnonymousUser,
    *,
    source: str | None = None,
    behavior: str | None = None,
    scope: str | None = None,
    team: str | None = None,
) -> QuerySet[Rule]:
    rules = rules_visible_to(user)
    for lookup, value in (("source", source), ("behavior", behavior), ("scope", scope), ("team__name", team)):
        if value:
            rules = rules.filter(**{lookup: value})
    return rules.order_by("id")


def is_approver_of(user: User | AnonymousUser, team_id: int) -> bool:
    teams = permissions.team_ids_for(user, role=Role.APPROVER)
    return teams is None or team_id in teams
