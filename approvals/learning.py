"""Reads that learn from the audit log: what-if replay of a rule draft, and rule suggestions.

Read-only, like `selectors`: every recorded call of a team is rebuilt into the engine's
input by `engine_input` — the builder submit and explain use — and decided again with
the draft. Nothing here writes; the autopilot's writes are in `services`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import policy
from approvals import selectors
from approvals.engine_input import engine_input, engine_rule_items
from approvals.models import PermissionRequest, Rule
from policy.learning import AnsweredCall, Evidence, Suggestion, depends_on_paths, suggest

# Where a draft's added rules sort among saved ones: after them, as a new row would.
_DRAFT_IDS_FROM = 10**15


@dataclass(frozen=True)
class Draft:
    """Rule changes not yet saved: rules to add, ids to remove, rules to replace by id."""

    add: list[Rule] = field(default_factory=list)
    remove: frozenset[int] = frozenset()
    replace: dict[int, Rule] = field(default_factory=dict)


@dataclass
class ChangedCall:
    request_id: str
    tool_name: str
    tool_input: Any
    old: str
    new: str
    human: str | None


@dataclass
class WhatIf:
    counts: Counter[str] = field(default_factory=Counter)
    changed: list[ChangedCall] = field(default_factory=list)  # one page of them, newest first
    total_changed: int = 0
    flagged: int = 0
    uncertain: int = 0
    replayed: int = 0


def drafted_rules(team_id: int, draft: Draft) -> list[Rule]:
    """The team's unexpired rules with the draft applied, in id order (added ones last)."""
    current = sorted(_all(selectors.team_rules(team_id)), key=lambda r: r.pk)
    rules = [draft.replace.get(r.pk, r) for r in current if r.pk not in draft.remove]
    for offset, added in enumerate(draft.add):
        added.pk = _DRAFT_IDS_FROM + offset
        rules.append(added)
    return rules


def _all(indexed: selectors.TeamRules) -> list[Rule]:
    scoped = [r for group in indexed.by_agent.values() for r in group]
    scoped += [r for group in indexed.by_session.values() for r in group]
    return indexed.everyone + scoped + indexed.project


class _Replayer:
    """Decides recorded calls against one indexed rule set, compiling each covering set once
    and deciding each distinct call once (agents repeat themselves)."""

    def __init__(self, rules: selectors.TeamRules) -> None:
        self.rules = rules
        self.covering: dict[tuple[Any, str, str], tuple[tuple[int, ...], policy.CompiledRules]] = {}
        self.compiled: dict[tuple[int, ...], policy.CompiledRules] = {}
        self.decided: dict[tuple[tuple[int, ...], str], str] = {}

    def behavior(self, row: dict[str, Any], doc: dict[str, Any], call_key: str) -> str:
        key, compiled = self._rules_for(row["agent_id"], doc["session_id"], doc["cwd"])
        found = self.decided.get((key, call_key))
        if found is None:
            found = self.decided[(key, call_key)] = policy.decide(doc, rules=compiled).behavior
        return found

    def _rules_for(self, agent_id: Any, session_id: str, cwd: str) -> tuple[tuple[int, ...], policy.CompiledRules]:
        found = self.covering.get((agent_id, session_id, cwd))
        if found is None:
            rules = self.rules.covering(agent_id=agent_id, session_id=session_id, cwd=cwd)
            key = tuple(r.pk for r in rules)
            if key not in self.compiled:
                self.compiled[key] = policy.compile_rules(engine_rule_items(rules))
            found = (key, self.compiled[key])
            self.covering[(agent_id, session_id, cwd)] = found
        return found


def _call_key(doc: dict[str, Any]) -> str:
    # What the behavior depends on once the rules are fixed. The session only feeds denial
    # tracking, which a replay starts empty and which never changes the behavior.
    fields = ("tool_name", "tool_input", "cwd", "mode", "context", "additional_directories", "home", "facts")
    return json.dumps([doc.get(f) for f in fields], sort_keys=True, default=str)


_CALL_FIELDS = (
    "id",
    "agent_id",
    "tool_name",
    "tool_input",
    "cwd",
    "permission_mode",
    "context",
    "session_id",
    "facts",
    "evaluation__behavior",
    "decision__behavior",
    "decision__reason_type",
)


def recorded_calls(team_id: int, since: datetime, until: datetime) -> Iterator[dict[str, Any]]:
    """The team's recorded calls in [since, until), newest first, as plain rows."""
    rows = PermissionRequest.objects.filter(team_id=team_id, created_at__gte=since, created_at__lt=until)
    return rows.order_by("-created_at", "-id").values(*_CALL_FIELDS).iterator(chunk_size=2000)


def recorded_engine_input(row: dict[str, Any]) -> dict[str, Any]:
    """A recorded call as submit built it; the recorded mode is already the effective one.

    Recorded calls carry no hook outputs or denial state; the agent's facts are the ones
    it reported then (the disk may have changed since, which is what `uncertain` counts).
    """
    keys = ("tool_name", "tool_input", "cwd", "permission_mode", "context", "session_id", "facts")
    call = {key: row.get(key) for key in keys}
    return engine_input(call, registered_mode=row["permission_mode"])


def request_engine_input(request: PermissionRequest) -> dict[str, Any]:
    """One recorded call's engine input, as `recorded_engine_input` builds it from a row."""
    fields = ("agent_id", "tool_name", "tool_input", "cwd", "permission_mode", "context", "session_id", "facts")
    return recorded_engine_input({name: getattr(request, name) for name in fields})


def what_if(*, team_id: int, draft: Draft, since: datetime, until: datetime, offset: int, limit: int) -> WhatIf:
    """Replay the team's recorded calls with the draft; what would change, and who answered it.

    - A call counts as changed when the draft's outcome differs from its recorded one
      *and* from today's rules (so a change made since it was recorded is not the draft's).
    - `flagged`: changed to allow, where a person denied it. `uncertain`: changed calls
      whose outcome depends on paths (recorded without the agent's facts).
    """
    drafted = _Replayer(selectors.indexed_rules(drafted_rules(team_id, draft)))
    today = _Replayer(selectors.team_rules(team_id))
    result = WhatIf()
    for row in recorded_calls(team_id, since, until):
        result.replayed += 1
        doc = recorded_engine_input(row)
        call_key = _call_key(doc)
        old = row["evaluation__behavior"] or row["decision__behavior"] or "ask"
        new = drafted.behavior(row, doc, call_key)
        if new == old or today.behavior(row, doc, call_key) == new:
            continue
        human = row["decision__behavior"] if row["decision__reason_type"] == "user" else None
        _count(result, row, old, new, human, offset, limit)
    return result


def _count(result: WhatIf, row: dict[str, Any], old: str, new: str, human: str | None, offset: int, limit: int) -> None:
    result.counts[f"{old}->{new}"] += 1
    result.flagged += new == "allow" and human == "deny"
    result.uncertain += depends_on_paths(row["tool_name"], row["tool_input"])
    if offset <= result.total_changed < offset + limit:
        result.changed.append(ChangedCall(str(row["id"]), row["tool_name"], row["tool_input"], old, new, human))
    result.total_changed += 1


# --- suggestions ------------------------------------------------------------------------

# People's answers read for suggestions: the newest this many in the window.
SUGGESTION_EVIDENCE_LIMIT = 5000


def answered_calls(team_id: int, since: datetime, until: datetime) -> list[AnsweredCall]:
    """Calls people answered (allow or deny, not timeouts) in [since, until), newest first."""
    rows = (
        PermissionRequest.objects.filter(
            team_id=team_id, created_at__gte=since, created_at__lt=until, decision__reason_type="user"
        )
        .order_by("-created_at", "-id")
        .values(*_CALL_FIELDS, "decision__decided_by", "evaluation__suggested_rules", "evaluation__destructive_warning")
    )
    return [
        AnsweredCall(
            doc=recorded_engine_input(row),
            answer="allow" if row["decision__behavior"] == "allow" else "deny",
            session_id=row["session_id"],
            person=row["decision__decided_by"],
            suggested_rules=tuple(row["evaluation__suggested_rules"] or ()),
            destructive=bool(row["evaluation__destructive_warning"]),
        )
        for row in rows[:SUGGESTION_EVIDENCE_LIMIT]
    ]


def rule_suggestions(*, team_id: int, since: datetime, until: datetime, min_calls: int = 3) -> list[Suggestion]:
    """Narrow rules people's repeated answers support, strongest evidence first."""
    existing = {(r.rule, r.behavior) for r in _all(selectors.team_rules(team_id))}
    found = suggest(answered_calls(team_id, since, until), min_calls=min_calls)
    return [s for s in found if (s.rule, s.behavior) not in existing]


__all__ = ["Draft", "Evidence", "Suggestion", "WhatIf", "rule_suggestions", "what_if"]
