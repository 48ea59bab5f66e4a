"""What changed since a person last allowed a call like this one.

"Like this": the same agent and tool acting on the same thing — a command's first word
(`pytest`, `npm`), a file's path, a URL's host, else the tool alone. The card then says
what differs from that allowed call: the input, line by line for a command; the working
directory, the session and the mode. Data in, words out; nothing here imports Django.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from approvals.why import PATH_KEYS
from policy.urls import parse_web_url

# A command diff on a phone card: enough to see what moved, never a wall.
DIFF_LINES = 8


def likeness_key(tool_name: str, tool_input: Any) -> str:
    """What makes two calls "like" each other (with the agent): the tool and what it acts on."""
    data = tool_input if isinstance(tool_input, dict) else {}
    command = data.get("command")
    if tool_name == "Bash" and isinstance(command, str):
        words = command.split()
        return f"Bash {words[0] if words else ''}"
    url = data.get("url")
    if tool_name == "WebFetch" and isinstance(url, str):
        parsed = parse_web_url(url)
        return f"WebFetch {parsed.host if parsed is not None else url}"
    path = next((str(data[key]) for key in PATH_KEYS if isinstance(data.get(key), str)), "")
    return f"{tool_name} {path}"


def likeness_hash(tool_name: str, tool_input: Any) -> str:
    """`likeness_key` as each request stores it (`PermissionRequest.likeness`): SHA-256, hex.

    - Stored, so "the last allow like this one" is one indexed read, not a scan in Python.
      Changing `likeness_key` means a migration that works the stored ones out again.
    """
    return hashlib.sha256(likeness_key(tool_name, tool_input).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Change:
    what: str  # "command", "input", "cwd", "session", "mode"
    before: str
    after: str
    # For a command: its unified diff, "-"/"+" lines, at most DIFF_LINES.
    diff: tuple[str, ...] = ()


def changes_between(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """How `after` differs from `before` (each: tool_name, tool_input, cwd, session_id, mode)."""
    found = _input_changes(before["tool_name"], before["tool_input"], after["tool_input"])
    for key, what in (("cwd", "cwd"), ("session_id", "session"), ("mode", "mode")):
        if before.get(key) != after.get(key):
            found.append(Change(what, str(before.get(key) or ""), str(after.get(key) or "")))
    return found


def _input_changes(tool_name: str, before: Any, after: Any) -> list[Change]:
    if before == after:
        return []
    old_command = before.get("command") if isinstance(before, dict) else None
    new_command = after.get("command") if isinstance(after, dict) else None
    if tool_name == "Bash" and isinstance(old_command, str) and isinstance(new_command, str):
        return [Change("command", old_command, new_command, _diff(old_command, new_command))]
    old_text, new_text = _text(before), _text(after)
    return [Change("input", old_text, new_text, _diff(old_text, new_text))]


def _text(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _diff(old: str, new: str) -> tuple[str, ...]:
    lines = [
        line
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"… {len(lines) - DIFF_LINES} more changed lines"]
    return tuple(lines)
