"""Rules: create, validate, update and delete, each checked by the engine's own parser."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User

import policy
import policy.learning
from approvals.models import (
    Agent,
    Rule,
    RuleBehavior,
    RuleScope,
    RuleSource,
    Team,
)
from approvals.services.outcomes import ServiceError

log = logging.getLogger(__name__)


def _validated_rule(rule: str, behavior: str, source: str) -> str:
    if behavior not in RuleBehavior.values:
        raise ServiceError(f"behavior must be allow, deny or ask, not {behavior!r}")
    if source not in RuleSource.values:
        raise ServiceError(f"unknown source {source!r}; use one of {', '.join(RuleSource.values)}")
    try:
        return str(policy.parse_rule(rule))
    except policy.RuleSyntaxError as exc:
        raise ServiceError(f"invalid rule {rule!r}: {exc}") from None


def rule_create(
    *,
    rule: str,
    behavior: str,
    source: str,
    team: Team,
    scope: str = RuleScope.GLOBAL,
    agent: Agent | None = None,
    project_path: str = "",
    session_id: str = "",
    expires_at: datetime | None = None,
    ask_timeout: int | None = None,
    approvals_required: int = 1,
    approver_group: str = "",
    created_by: User | None = None,
    note: str = "",
) -> Rule:
    text = _validated_rule(rule, behavior, source)
    _check_scope(scope, agent, project_path, session_id)
    _check_quorum(behavior, approvals_required, approver_group)
    return Rule.objects.create(
        rule=text,
        behavior=behavior,
        source=source,
        team=team,
        scope=scope,
        agent=agent,
        project_path=project_path,
        session_id=session_id,
        expires_at=expires_at,
        ask_timeout=ask_timeout,
        approvals_required=approvals_required,
        approver_group=approver_group,
        created_by=created_by,
        note=note,
    )


def rule_validate(
    *,
    rule: str,
    behavior: str,
    source: str,
    scope: str = RuleScope.GLOBAL,
    agent: Agent | None = None,
    project_path: str = "",
    session_id: str = "",
) -> str:
    """Check a rule as `rule_create` would, saving nothing (a what-if draft); its normalised text."""
    text = _validated_rule(rule, behavior, source)
    _check_scope(scope, agent, project_path, session_id)
    return text


def rule_update(*, rule: Rule, rule_text: str | None = None, **changes: Any) -> Rule:
    """Change a rule's fields; `rule_text` changes the rule string (`rule` names the row)."""
    if rule_text is not None:
        changes["rule"] = rule_text
    for name, value in changes.items():
        setattr(rule, name, value)
    rule.rule = _validated_rule(rule.rule, rule.behavior, rule.source)
    _check_scope(rule.scope, rule.agent, rule.project_path, rule.session_id)
    _check_quorum(rule.behavior, rule.approvals_required, rule.approver_group)
    rule.save()
    return rule


def rule_delete(*, rule: Rule) -> None:
    rule.delete()


def _check_scope(scope: str, agent: Agent | None, project_path: str, session_id: str) -> None:
    if scope not in RuleScope.values:
        raise ServiceError(f"scope must be one of {', '.join(RuleScope.values)}, not {scope!r}")
    if scope == RuleScope.AGENT and agent is None:
        raise ServiceError("a rule with scope 'agent' needs an agent")
    if scope == RuleScope.PROJECT and not project_path:
        raise ServiceError("a rule with scope 'project' needs a project_path")
    if scope == RuleScope.SESSION and not session_id:
        raise ServiceError("a rule with scope 'session' needs a session_id")


MAX_APPROVALS = 10


def _check_quorum(behavior: str, approvals_required: int, approver_group: str) -> None:
    """A quorum belongs to ask rules: an allow or deny rule never waits for anyone."""
    if not 1 <= approvals_required <= MAX_APPROVALS:
        raise ServiceError(f"approvals_required must be between 1 and {MAX_APPROVALS}, not {approvals_required}")
    if behavior != RuleBehavior.ASK and (approvals_required != 1 or approver_group):
        raise ServiceError("approvals_required and approver_group apply to ask rules only")
