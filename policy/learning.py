"""Learn from people's answers: narrow rules, rule suggestions and the autopilot's evidence.

Pure like the rest of `policy`: the server hands in the calls people answered (each as
the engine document its submit was decided on) and gets back rules with their evidence.
The one promise every function here keeps: a rule offered or saved from this evidence
never allows a call a person denied within it, and never denies one a person allowed —
checked by running the engine on every such call with the rule, not by comparing text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from policy.grants import grant_rule
from policy.pipeline import decide
from policy.rules import RuleSyntaxError, compile_rules, parse_rule
from policy.shell import parse as parse_command
from policy.tools import EDIT_TOOLS, READ_TOOLS, is_mcp_name, lookup

Answer = Literal["allow", "deny"]


@dataclass(frozen=True)
class AnsweredCall:
    """One call a person answered, as the engine saw it."""

    doc: Mapping[str, Any]  # the engine input its submit was decided on
    answer: Answer
    session_id: str
    person: str
    suggested_rules: tuple[str, ...] = ()
    destructive: bool = False


@dataclass(frozen=True)
class Evidence:
    calls: int
    sessions: int
    people: int
    denials: int  # people's denials of calls the rule covers

    def to_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "sessions": self.sessions, "people": self.people, "denials": self.denials}


@dataclass(frozen=True)
class Suggestion:
    rule: str
    behavior: Answer
    evidence: Evidence

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "behavior": self.behavior, "evidence": self.evidence.to_dict()}


def allow_pattern(call: AnsweredCall) -> str | None:
    """The allow rule a call's approval stands for: the rule an "Always allow" grant of it
    saves (`policy.grants.grant_rule`), so suggestions, the autopilot and grants narrow alike.

    `Bash(npm run test:*)` for a plain command with a safe prefix, else the exact command;
    one file, one domain or one MCP tool otherwise; None for destructive or unwritable calls.
    """
    tool_input = call.doc.get("tool_input")
    return grant_rule(
        str(call.doc.get("tool_name", "")),
        tool_input if isinstance(tool_input, Mapping) else {},
        call.suggested_rules,
        destructive=call.destructive,
    )


def narrow_rule(suggested_rules: Sequence[str]) -> str | None:
    """The one rule that covers a call and no more than its kind, or None.

    - Takes the engine's `suggested_rules` for the call (`Bash(npm run test:*)`,
      `Edit(//srv/app/a.py)`, `WebFetch(domain:example.com)`, `mcp__github__create_issue`).
    - None when there is not exactly one (a compound command needs several, a blocked
      or destructive one gets none) or when the rule names a whole tool: `Bash`, `Edit`
      and `WebFetch` are never narrow; one MCP tool is.
    Deny suggestions use it; allow rules use the stricter `allow_pattern`.
    """
    if len(suggested_rules) != 1:
        return None
    try:
        parsed = parse_rule(suggested_rules[0])
    except RuleSyntaxError:
        return None
    if parsed.content is None:
        if not is_mcp_name(parsed.tool_name):
            return None
    elif parsed.content.strip(" *:") == "":
        return None
    return str(parsed)


def deny_rule(call: AnsweredCall) -> str | None:
    """A narrow rule to deny a call a person denied: its suggestion, or for a command the
    engine would not suggest allowing (destructive, blocked), the same prefix rule."""
    rule = narrow_rule(call.suggested_rules)
    if rule is not None or call.doc.get("tool_name") != "Bash":
        return rule
    command = (call.doc.get("tool_input") or {}).get("command")
    if not isinstance(command, str):
        return None
    return narrow_rule(parse_command(command).suggestions)


def rule_decides(rule: str, behavior: Answer, doc: Mapping[str, Any]) -> bool:
    """Whether `rule` alone, as a `behavior` rule, makes the engine answer `behavior` for `doc`."""
    compiled = compile_rules([{"rule": rule, "behavior": behavior, "source": "autopilot"}])
    plain = {**doc, "denial_state": {}, "pre_tool_use_hooks": []}
    return decide(plain, rules=compiled).behavior == behavior


def evidence_for(rule: str, behavior: Answer, calls: Iterable[AnsweredCall]) -> Evidence:
    """How many answers of `behavior` the rule stands on, and how many people's denials it covers.

    - For an allow rule the supporting answers are allows of this exact narrow pattern; a
      denial counts if the rule would allow the denied call.
    - For a deny rule the supporting answers are the denials it would deny; `denials`
      counts them too, and any allow it would deny makes the rule unusable (see `usable`).
    """
    supporting: list[AnsweredCall] = []
    denials = 0
    for call in calls:
        if behavior == "allow":
            if call.answer == "allow" and allow_pattern(call) == rule:
                supporting.append(call)
            elif call.answer == "deny" and rule_decides(rule, "allow", call.doc):
                denials += 1
        elif call.answer == "deny" and deny_rule(call) == rule:
            supporting.append(call)
            denials += 1
    sessions = {c.session_id or f"call-{i}" for i, c in enumerate(supporting)}
    return Evidence(len(supporting), len(sessions), len({c.person for c in supporting}), denials)


def contradicted(rule: str, behavior: Answer, calls: Iterable[AnsweredCall]) -> bool:
    """Whether a person answered the opposite for any call the rule would decide."""
    if behavior == "allow":
        return any(c.answer == "deny" and rule_decides(rule, "allow", c.doc) for c in calls)
    return any(c.answer == "allow" and rule_decides(rule, "deny", c.doc) for c in calls)


def suggest(calls: Sequence[AnsweredCall], *, min_calls: int = 3, min_sessions: int = 2) -> list[Suggestion]:
    """Narrow allow rules from repeated allows and deny rules from repeated denials.

    - An allow rule needs `min_calls` allows of its exact pattern from `min_sessions`
      sessions, none of them destructive, and no denial it would have allowed.
    - A deny rule needs `min_calls` denials of its pattern and no allow it would deny.
    - Strongest evidence first.
    """
    candidates: dict[tuple[str, Answer], None] = {}
    for call in calls:
        rule = deny_rule(call) if call.answer == "deny" else allow_pattern(call)
        if rule is not None:
            candidates[(rule, call.answer)] = None
    found = []
    for rule, behavior in candidates:
        evidence = evidence_for(rule, behavior, calls)
        if evidence.calls < min_calls or (behavior == "allow" and evidence.sessions < min_sessions):
            continue
        if (behavior == "allow" and evidence.denials) or contradicted(rule, behavior, calls):
            continue
        found.append(Suggestion(rule, behavior, evidence))
    return sorted(found, key=lambda s: (-s.evidence.calls, -s.evidence.sessions, s.rule))


def autopilot_ready(rule: str, calls: Sequence[AnsweredCall], *, approvals: int) -> Evidence | None:
    """The evidence for the autopilot to allow `rule` on its own, or None if it is not enough.

    `approvals` allows of exactly this pattern (`allow_pattern`) from as many distinct sessions, no
    destructive call among them, and no denial in `calls` that the rule would allow.
    """
    evidence = evidence_for(rule, "allow", calls)
    if evidence.sessions < approvals or evidence.calls < approvals or evidence.denials:
        return None
    return evidence


def depends_on_paths(tool_name: str, tool_input: Any) -> bool:
    """Whether a decision for this call reads paths (cwd, home, what is on disk).

    Calls recorded without the agent's facts about its machine replay against the
    server's view of paths, so their replayed outcome is uncertain.
    """
    found = lookup(tool_name)
    name = found.spec.name if found.spec is not None else tool_name
    if name in EDIT_TOOLS or name in READ_TOOLS:
        return True
    if name == "Bash" and isinstance(tool_input, dict) and isinstance(tool_input.get("command"), str):
        return parse_command(tool_input["command"]).names_paths
    return False
