"""Denial tracking: after 3 denials in a row of the same pattern, tell the model to stop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LIMIT = 3
GUIDANCE = (
    "This action has now been denied {count} times in a row. Do not request it again: "
    "stop and try a different approach, or ask the user how they want to proceed."
)


def pattern_key(tool_name: str, suggested_rule: str | None) -> str:
    """Denials count per tool and, for Bash, per command prefix (``Bash(rm:*)``)."""
    return suggested_rule or tool_name


def record(state: Mapping[str, Any] | None, session_id: str, key: str, behavior: str) -> dict[str, Any]:
    """Return the new state after one outcome; an allow resets, an ask changes nothing."""
    previous = dict(state) if isinstance(state, Mapping) else {}
    if previous.get("session_id") != session_id:
        previous = {}
    stored = previous.get("count")
    count = stored if isinstance(stored, int) else 0
    same = previous.get("key") == key
    if behavior == "allow":
        return {"session_id": session_id, "key": None, "count": 0}
    if behavior == "deny":
        return {"session_id": session_id, "key": key, "count": (count if same else 0) + 1}
    return {"session_id": session_id, "key": previous.get("key"), "count": count}


def guidance(state: Mapping[str, Any]) -> str | None:
    count = state.get("count", 0)
    if isinstance(count, int) and count >= LIMIT:
        return GUIDANCE.format(count=count)
    return None
