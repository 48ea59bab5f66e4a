"""The running state of one decision: trace, warnings and the verdict so far."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policy.decision import Behavior, Decision


@dataclass
class Verdict:
    """A layer's answer; ``forced`` asks (hook, safety check) skip auto-resolution."""

    behavior: Behavior
    reason: dict[str, Any]
    message: str = ""
    forced: bool = False


@dataclass
class Run:
    trace: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tool_name: str = ""
    tool_input: dict[str, Any] = field(default_factory=dict)
    updated_input: dict[str, Any] | None = None

    def step(self, layer: str, result: str, **details: Any) -> None:
        self.trace.append({"layer": layer, "result": result, **details})

    def decision(self, verdict: Verdict) -> Decision:
        return Decision(
            behavior=verdict.behavior,
            reason=verdict.reason,
            message=verdict.message,
            updated_input=self.updated_input,
            warnings=list(self.warnings),
            trace=list(self.trace),
            tool_name=self.tool_name,
            tool_input=self.tool_input,
            reserved=verdict.behavior == "ask" and verdict.forced,
        )
