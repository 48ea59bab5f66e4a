"""The engine's view of a team's rules, compiled once per rule set and re-read when the team's
`RulesVersion` changes (a read-side cache; nothing here writes).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import policy
import policy.learning
from approvals import selectors
from approvals.engine_input import engine_rule_items
from approvals.models import (
    Agent,
    Rule,
    RuleBehavior,
    RuleScope,
)
from approvals.quorum import RuleQuorum

log = logging.getLogger(__name__)


def _compiled(rules: list[Rule]) -> policy.CompiledRules:
    return policy.compile_rules(engine_rule_items(rules))


@dataclass
class _TeamRuleCache:
    """One team's rules at one version, and what was compiled from them per kind of call."""

    rules: selectors.TeamRules
    compiled: dict[tuple[int, ...], tuple[policy.CompiledRules, dict[str, int]]] = field(default_factory=dict)
    # rule id -> that quorum ask rule compiled alone (`quorum_rules_for`)
    quorum: dict[int, policy.CompiledRules] = field(default_factory=dict)


# team id -> its rules at the version last read. Every call re-reads the version (one
# small row, changed by a trigger in the same commit as any rule change), so a new deny
# rule applies to the very next call in every process; a TTL would leave a window.
_team_rule_caches: dict[int, _TeamRuleCache] = {}


_COMPILED_PER_TEAM = 1024


def compiled_rules_for(
    agent: Agent, session_id: str, cwd: str, *, version: str | None = None
) -> tuple[policy.CompiledRules, dict[str, int]]:
    """The engine's view of the rules that apply to one call, compiled once per rule set.

    Returns the compiled rules and a map from rule text+source to its `Rule.ask_timeout`.
    - `version`: the team's rules version, when the caller read it already (submit reads
      it with the rest of what it needs, `selectors.submit_context`); else it is read here.
    """
    if version is None:
        version = selectors.rules_version(agent.team_id)
    cache = _team_rule_caches.get(agent.team_id)
    if cache is None or cache.rules.version != version:
        cache = _TeamRuleCache(selectors.team_rules(agent.team_id, version))
        _team_rule_caches[agent.team_id] = cache
    rules = cache.rules.covering(agent_id=agent.pk, session_id=session_id, cwd=cwd)
    # The team-wide rules are the same for every call at this version: the rest names it.
    key = tuple(r.pk for r in rules if r.scope != RuleScope.GLOBAL)
    found = cache.compiled.get(key)
    if found is None:
        timeouts = {f"{r.source}:{r.rule}": r.ask_timeout for r in rules if r.ask_timeout}
        found = (_compiled(rules), timeouts)
        if len(cache.compiled) >= _COMPILED_PER_TEAM:
            cache.compiled.clear()  # many sessions at one version: start over, never grow
        cache.compiled[key] = found
    return found


def quorum_rules_for(agent: Agent, session_id: str, cwd: str) -> list[tuple[RuleQuorum, policy.CompiledRules]]:
    """The ask rules covering this call's scope that ask for more than one approval, each compiled alone.

    - Read from the same per-team cache as `compiled_rules_for` (call it first).
    - Each is compiled on its own so the caller can tell which of them match the call:
      where several match, the largest quorum wins, not the one the engine reports.
    """
    cache = _team_rule_caches.get(agent.team_id)
    if cache is None:
        return []
    found = []
    for rule in cache.rules.covering(agent_id=agent.pk, session_id=session_id, cwd=cwd):
        if rule.behavior != RuleBehavior.ASK or rule.approvals_required <= 1:
            continue
        compiled = cache.quorum.get(rule.pk)
        if compiled is None:
            compiled = cache.quorum[rule.pk] = _compiled([rule])
        found.append((RuleQuorum(rule.rule, rule.source, rule.approvals_required, rule.approver_group), compiled))
    return found
