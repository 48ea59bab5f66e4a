"""Dry runs of the engine with a team's rules: nothing is stored, no provider is called."""

from __future__ import annotations

from typing import Any

import policy
from approvals.engine_input import engine_input, engine_rule_items
from approvals.models import (
    Agent,
    Rule,
    Team,
)
from approvals.selectors.identities import team_settings
from approvals.selectors.rules import team_rules_applying


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


def explain_call(
    *, team_id: int, agent: Agent | None, call: dict[str, Any], extra_rules: list[dict[str, Any]]
) -> tuple[Any, list[Rule]]:
    """Run the engine as a dry run with the team's rules (plus `extra_rules`); writes nothing.

    - `call` in the submit vocabulary; its input is built as submit builds it
      (`engine_input`), with the agent's registered mode capping the requested one.
    - Pre-decision providers (webhooks, the classifier) are not called: a dry run makes
      no network call on anyone's behalf.
    """
    unknown_tools = team_settings(team_id).unknown_tools
    doc = engine_input(call, registered_mode=agent.default_mode if agent else None, unknown_tools=unknown_tools)
    rules = team_rules_applying(team_id=team_id, agent=agent, session_id=doc["session_id"], cwd=doc["cwd"])
    compiled = policy.compile_rules(engine_rule_items(rules) + extra_rules)
    return policy.decide(doc, rules=compiled), rules
