"""The autopilot: narrow allow rules learned from people's repeated approvals, with undo."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

import policy
import policy.learning
from approvals import learning, selectors
from approvals.audit import append_decision
from approvals.models import (
    AuditKind,
    AutopilotSetting,
    PermissionRequest,
    Rule,
    RuleSource,
    Team,
)
from approvals.rule_cache import compiled_rules_for
from approvals.services.outcomes import ServiceError
from approvals.services.rules import rule_create

log = logging.getLogger(__name__)


AUTOPILOT_LIMITS = {"approvals": (2, 100), "trial_hours": (1, 24 * 30), "window_days": (1, 365)}


def autopilot_configure(*, team: Team, enabled: bool, **limits: int | None) -> AutopilotSetting:
    """Turn a team's autopilot on or off; `approvals`, `trial_hours`, `window_days` as given."""
    setting, _ = AutopilotSetting.objects.get_or_create(team=team)
    setting.enabled = enabled
    for name, value in limits.items():
        if name not in AUTOPILOT_LIMITS:
            raise ServiceError(f"unknown autopilot setting {name!r}")
        low, high = AUTOPILOT_LIMITS[name]
        if value is not None and not low <= value <= high:
            raise ServiceError(f"{name} must be between {low} and {high}, not {value}")
        if value is not None:
            setattr(setting, name, value)
    setting.save()
    return setting


def autopilot_to_demote(request: PermissionRequest) -> list[Rule]:
    """The autopilot rules that would allow this call, which a person's deny of it demotes.

    - Read before the deny's transaction; `autopilot_demote` deletes them inside it, so no
      later call meets them once the deny has committed. A rule promoted after this read
      is missed as it would be by a read inside the transaction (each statement sees what
      had committed when it started), and its promotion saw no deny to hold it back.
    """
    rules = list(Rule.objects.filter(team_id=request.team_id, source=RuleSource.AUTOPILOT))
    if not rules:
        return []
    doc = learning.request_engine_input(request)
    return [r for r in rules if policy.learning.rule_decides(r.rule, "allow", doc)]


def autopilot_demote(demoted: list[Rule]) -> dict[str, Any]:
    """Delete the rules `autopilot_to_demote` found; call inside the deny's transaction.

    Returns what to add to the deny's audit reason.
    """
    if not demoted:
        return {}
    Rule.objects.filter(pk__in=[r.pk for r in demoted]).delete()
    return {"demoted_autopilot": [r.rule for r in demoted]}


def autopilot_after_allow(request: PermissionRequest) -> None:
    # The person's allow has committed and been announced: a failure here may cost the
    # autopilot a promotion, never the decision, so it is logged and not raised.
    try:
        autopilot_consider(request=request)
    except DatabaseError as exc:
        log.error("autopilot could not consider request %s: %s", request.pk, exc)


def autopilot_consider(*, request: PermissionRequest) -> Rule | None:
    """After a person allowed this call, save its narrow pattern as an autopilot rule if earned.

    - Only for a team that turned the autopilot on; the rule lives `trial_hours`.
    - Earned: `approvals` allows of exactly this pattern from as many sessions, none
      destructive, no denial in the window that the rule would allow.
    - Never for a destructive call, and never when the rule would not decide the call
      itself: a protected path, or a deny or ask rule (a policySettings one reserving the
      call for a person) still wins over it, so such a pattern is never saved.
    - The rule and its `autopilot` audit row (naming this request, the rule, its expiry
      and the evidence) commit together: no promotion is missing from the hash chain.
    """
    setting = selectors.autopilot_setting(request.team_id)
    if not setting.enabled:
        return None
    rule = _autopilot_pattern(request)
    if rule is None:
        return None
    now = timezone.now()
    live = Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    if Rule.objects.filter(live, team_id=request.team_id, source=RuleSource.AUTOPILOT, rule=rule).exists():
        return None
    calls = learning.answered_calls(request.team_id, now - timedelta(days=setting.window_days), now)
    evidence = policy.learning.autopilot_ready(rule, calls, approvals=setting.approvals)
    if evidence is None or not _autopilot_decides(request, rule):
        return None
    until = now + timedelta(hours=setting.trial_hours)
    note = (
        f"Autopilot: {evidence.calls} approvals in {evidence.sessions} sessions by {evidence.people} "
        f"people, no denial; on trial until {until:%Y-%m-%d %H:%M} UTC."
    )
    with transaction.atomic():
        saved = rule_create(
            rule=rule, behavior="allow", source=RuleSource.AUTOPILOT, team=request.team, expires_at=until, note=note
        )
        append_decision(
            request,
            kind=AuditKind.AUTOPILOT,
            behavior="allow",
            message=promotion_sentence(saved.rule, setting.trial_hours),
            reason={
                "type": "autopilot",
                "rule": saved.rule,
                "source": RuleSource.AUTOPILOT,
                "rule_id": saved.pk,
                "expires_at": until.isoformat(),
                "trial_hours": setting.trial_hours,
                "approvals": evidence.calls,
                "sessions": evidence.sessions,
                "people": evidence.people,
                "note": note,
            },
            decided_by="autopilot",
            surface="autopilot",
        )
    return saved


def promotion_sentence(rule: str, trial_hours: int) -> str:
    """An autopilot row's message: "autopilot saved Bash(npm run test:*) for a 7-day trial"."""
    days, hours = divmod(trial_hours, 24)
    trial = f"{days}-day" if days and not hours else f"{trial_hours}-hour"
    return f"autopilot saved {rule} for a {trial} trial"


def _autopilot_pattern(request: PermissionRequest) -> str | None:
    """The rule an "Always allow" grant of this call would save; None if it may not be saved."""
    evaluation = request.evaluation or {}
    answered = policy.learning.AnsweredCall(
        doc={"tool_name": request.tool_name, "tool_input": request.tool_input},
        answer="allow",
        session_id=request.session_id,
        person="",
        suggested_rules=tuple(evaluation.get("suggested_rules") or ()),
        destructive=bool(evaluation.get("destructive_warning")),
    )
    return policy.learning.allow_pattern(answered)


def _autopilot_decides(request: PermissionRequest, rule: str) -> bool:
    """Whether, with the team's rules plus `rule`, the call would be allowed by `rule` itself."""
    doc = learning.request_engine_input(request)
    compiled, _ = compiled_rules_for(request.agent, doc["session_id"], doc["cwd"])
    candidate = policy.compile_rules([{"rule": rule, "behavior": "allow", "source": RuleSource.AUTOPILOT}])
    verdict = policy.decide(doc, rules=compiled.merged(candidate))
    return verdict.behavior == "allow" and verdict.reason.get("source") == RuleSource.AUTOPILOT
