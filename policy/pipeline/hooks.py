"""Reconcile PreToolUse and PermissionRequest hook outputs (Claude Code's shapes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_ORDER = {"deny": 3, "ask": 2, "allow": 1}


@dataclass
class HookOutcome:
    """The combined hook verdict: deny beats ask beats allow; last updatedInput wins."""

    behavior: str | None = None
    message: str = ""
    hook: str = ""
    updated_input: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


def _unwrap(item: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = item.get("hookSpecificOutput")
    return inner if isinstance(inner, Mapping) else item


def _hook_name(item: Mapping[str, Any], index: int) -> str:
    for key in ("hook", "name", "command", "url"):
        value = item.get(key)
        if isinstance(value, str) and value:
            return value
    return f"PreToolUse[{index}]"


def pre_tool_use(hooks: list[Any]) -> HookOutcome:
    outcome = HookOutcome()
    for index, item in enumerate(hooks):
        if not isinstance(item, Mapping):
            outcome.warnings.append(f"PreToolUse hook output {index} ignored: not an object")
            continue
        output = _unwrap(item)
        updated = output.get("updatedInput")
        if isinstance(updated, dict):
            outcome.updated_input = updated
        decision = output.get("permissionDecision")
        if decision is None:
            continue
        if decision not in _ORDER:
            outcome.warnings.append(f"PreToolUse hook output {index} ignored: permissionDecision {decision!r}")
            continue
        if outcome.behavior is None or _ORDER[decision] > _ORDER[outcome.behavior]:
            outcome.behavior = decision
            reason = output.get("permissionDecisionReason")
            outcome.message = reason if isinstance(reason, str) else ""
            outcome.hook = _hook_name(item, index)
    return outcome


def permission_request(hooks: list[Any]) -> HookOutcome:
    """Headless resolution: any deny wins, else the first allow (with its updatedInput)."""
    outcome = HookOutcome()
    for index, item in enumerate(hooks):
        if not isinstance(item, Mapping):
            continue
        output = _unwrap(item)
        decision = output.get("decision")
        body = decision if isinstance(decision, Mapping) else output
        behavior = body.get("behavior")
        if behavior not in ("allow", "deny"):
            continue
        name = item.get("hook") or item.get("name") or f"PermissionRequest[{index}]"
        message = body.get("message")
        if behavior == "deny":
            return HookOutcome("deny", message if isinstance(message, str) else "", str(name))
        if outcome.behavior is None:
            updated = body.get("updatedInput")
            outcome = HookOutcome("allow", "", str(name), updated if isinstance(updated, dict) else None)
    return outcome
