"""The Decision the engine returns, and constructors for its ``reason`` field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Behavior = Literal["allow", "deny", "ask"]

# SPEC §3 reason types; validation and unknown tools are reported as ``other``.
REASON_TYPES = frozenset(
    {
        "rule",
        "hook",
        "classifier",
        "mode",
        "safetyCheck",
        "workingDirectory",
        "user",
        "timeout",
        "headless",
        "cancelled",
        "other",
    }
)


@dataclass
class Decision:
    """One decision: behavior, the reason that names what decided, and the trace."""

    behavior: Behavior
    reason: dict[str, Any]
    message: str = ""
    updated_input: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    suggested_rules: list[str] = field(default_factory=list)
    destructive_warning: str | None = None
    denial_state: dict[str, Any] = field(default_factory=dict)
    tool_name: str = ""
    tool_input: dict[str, Any] = field(default_factory=dict)
    # An ask reserved for a person (an ask rule, a safety check, a hook's ask, a word
    # that could match a deny rule): no classifier, automated racer or mode answers it.
    reserved: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (what ``python -m policy decide`` prints)."""
        return {
            "behavior": self.behavior,
            "reason": dict(self.reason),
            "message": self.message,
            "updated_input": self.updated_input,
            "warnings": list(self.warnings),
            "trace": [dict(step) for step in self.trace],
            "suggested_rules": list(self.suggested_rules),
            "destructive_warning": self.destructive_warning,
            "denial_state": dict(self.denial_state),
            "tool_name": self.tool_name,
            "tool_input": self.tool_input,
            "reserved": self.reserved,
        }


def rule_reason(rule: dict[str, Any]) -> dict[str, Any]:
    return {"type": "rule", **rule}


def hook_reason(hook: str, detail: str = "") -> dict[str, Any]:
    reason: dict[str, Any] = {"type": "hook", "hook": hook}
    if detail:
        reason["detail"] = detail
    return reason


def mode_reason(mode: str, detail: str = "") -> dict[str, Any]:
    reason: dict[str, Any] = {"type": "mode", "mode": mode}
    if detail:
        reason["detail"] = detail
    return reason


def simple_reason(kind: str, detail: str) -> dict[str, Any]:
    return {"type": kind, "detail": detail}


def classifier_reason(name: str, verdict: str | None, detail: str = "") -> dict[str, Any]:
    return {"type": "classifier", "classifier": name, "verdict": verdict, "detail": detail}
