"""The engine's input for one call: the one builder submit, explain and what-if share.

Explain must never differ from what happens, and a replay of a recorded call must see
what its submit saw, so every door that runs `policy.decide` builds its document and its
rule items here. Nothing in this module reads or writes the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

# How much each mode lets through without a person; an agent may ask for a mode at most
# as permissive as the one it was registered with.
MODE_LATITUDE = {"dontAsk": 0, "plan": 0, "default": 1, "acceptEdits": 2, "auto": 3, "bypassPermissions": 4}


class EngineRule(Protocol):
    """What the engine needs of a saved rule (a `Rule` row, or an unsaved draft of one)."""

    rule: str
    behavior: str
    source: str
    expires_at: Any


def effective_mode(requested: str | None, registered: str) -> str:
    """The agent's requested mode, unless it is more permissive than its registration."""
    if not requested or requested not in MODE_LATITUDE:
        return registered
    return requested if MODE_LATITUDE[requested] <= MODE_LATITUDE.get(registered, 1) else registered


def agent_hook_outputs(outputs: Iterable[Any]) -> list[Any]:
    """Hook results the agent reports may deny, ask or rewrite input, but never allow.

    The agent is the party being gated: a reported `allow` would let it approve itself.
    """
    stricter = []
    for output in outputs:
        if not isinstance(output, dict):
            continue
        output = dict(output)
        nested = output.get("hookSpecificOutput")
        if isinstance(nested, dict) and nested.get("permissionDecision") == "allow":
            output["hookSpecificOutput"] = {k: v for k, v in nested.items() if k != "permissionDecision"}
        if output.get("permissionDecision") == "allow":
            del output["permissionDecision"]
        stricter.append(output)
    return stricter


def engine_input(
    call: Mapping[str, Any],
    *,
    registered_mode: str | None,
    denial_state: dict[str, Any] | None = None,
    unknown_tools: str = "ask",
) -> dict[str, Any]:
    """The `policy.decide` document for one call, before the pre-decision providers run.

    - `call` uses the submit vocabulary (`permission_mode`, `pre_tool_use_hooks`, …).
    - `registered_mode`: the agent's mode, which caps the requested one; None only for a
      person's explain without an agent, where the requested mode stands.
    - `unknown_tools`: the team's answer to a tool the registry does not know (`ask`, `deny`).
    """
    requested = call.get("permission_mode")
    if registered_mode is None:
        mode = requested if requested in MODE_LATITUDE else "default"
    else:
        mode = effective_mode(requested, registered_mode)
    doc: dict[str, Any] = {
        "tool_name": call["tool_name"],
        "tool_input": call.get("tool_input", {}),
        "cwd": call.get("cwd") or "",
        "additional_directories": list(call.get("additional_directories") or []),
        "mode": mode,
        "context": call.get("context") or "interactive",
        "session_id": call.get("session_id") or "",
        "pre_tool_use_hooks": agent_hook_outputs(call.get("pre_tool_use_hooks") or []),
        "unknown_tools": unknown_tools,
    }
    if call.get("home"):
        doc["home"] = call["home"]
    if call.get("facts") is not None:
        # The agent's own machine as it reported it: the engine reads no other disk.
        doc["facts"] = call["facts"]
    doc["denial_state"] = denial_state or {}
    return doc


def engine_rule_items(rules: Iterable[EngineRule]) -> list[dict[str, Any]]:
    """Saved rules as the rule items `policy.compile_rules` takes."""
    return [
        {
            "rule": r.rule,
            "behavior": r.behavior,
            "source": r.source,
            **({"expires_at": r.expires_at.isoformat()} if r.expires_at else {}),
        }
        for r in rules
    ]
