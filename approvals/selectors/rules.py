"""Reads of rules: what applies to a call, the team's compiled cache input, the rules pages."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from approvals import permissions
from approvals.models import (
    Agent,
    AuditKind,
    AutopilotSetting,
    Decision,
    Rule,
    RuleScope,
    RuleSource,
    RulesVersion,
    TeamSettings,
)
from approvals.written import JoinedRead


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


def autopilot_setting(team_id: int) -> AutopilotSetting:
    """The team's autopilot setting; the default (off) when it was never set.

    - Read after every allow a person gives (`autopilot_consider`), so written out once
      per process (`approvals.written`).
    """
    return _AUTOPILOT.first(team_id) or AutopilotSetting(team_id=team_id)


# One row per team at most: the team is its primary key.
_AUTOPILOT = JoinedRead(AutopilotSetting, relations=(), match=("team",))


def autopilot_rules(team_ids: list[int] | None) -> QuerySet[Rule]:
    """Unexpired autopilot rules of these teams (None: every team), newest first."""
    now = timezone.now()
    rules = Rule.objects.filter(source=RuleSource.AUTOPILOT).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    rules = rules if team_ids is None else rules.filter(team_id__in=team_ids)
    return rules.select_related("team", "agent", "created_by").order_by("-id")


def autopilot_approvals(user: User | AnonymousUser, limit: int = 20) -> QuerySet[Decision]:
    """The newest calls the autopilot allowed, in the person's teams: its feed."""
    teams = permissions.team_ids_for(user)
    # The decisions its rules made; its promotions (`autopilot` rows, which name the rule too) are not approvals.
    rows = Decision.objects.filter(rule_source=RuleSource.AUTOPILOT, kind=AuditKind.DECISION)
    rows = rows if teams is None else rows.filter(team_id__in=teams)
    return rows.select_related("agent", "request").order_by("-created_at", "-id")[:limit]


def rule_get(rule_id: int) -> Rule | None:
    return Rule.objects.select_related("created_by", "agent", "team").filter(pk=rule_id).first()


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


def longest_ask_deadline() -> int:
    """The longest deadline any ask can get now, in seconds: what a hook must outwait.

    - The largest of `GATEHOUSE_ASK_TIMEOUT`, every team's `ask_timeout` and every rule's.
    """
    teams = TeamSettings.objects.aggregate(longest=Max("ask_timeout"))["longest"] or 0
    rules = Rule.objects.aggregate(longest=Max("ask_timeout"))["longest"] or 0
    return max(int(settings.GATEHOUSE_ASK_TIMEOUT), int(teams), int(rules))
