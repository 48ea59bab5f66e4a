"""Claude Code's own tool list, as its CLI showed it: names, input schemas, who asks.

``claude-code-<version>-tools.json`` (next to this module) is written by
``tests/policy/tools_oracle/record.py`` from the real CLI: each tool's ``input_schema`` as
the CLI sent it to the Messages API, and whether the CLI asked before running it in
default mode with no rules. Read once, at import; never edited by hand.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLAUDE_CODE_VERSION = "2.1.332"
RECORDING_PATH = Path(__file__).with_name(f"claude-code-{CLAUDE_CODE_VERSION}-tools.json")


@dataclass(frozen=True)
class RecordedTool:
    """One tool of the recording."""

    name: str
    input_schema: Mapping[str, Any]
    needs_permission: bool
    # Claude Code's own check refuses every call with this message (the tool never runs).
    refused: str = ""
    # False when Claude Code asks even under an allow rule naming the tool.
    allow_rule_answers: bool = True


def _allow_rule_answers(tool: Mapping[str, Any]) -> bool:
    for check in tool.get("rules") or []:
        if check["behavior"] == "allow" and check["rule"] == tool["name"]:
            return bool(check["claude"]["behavior"] != "ask")
    return True


def load(path: Path = RECORDING_PATH) -> dict[str, RecordedTool]:
    """Every tool of the recording one can call, by name."""
    doc = json.loads(path.read_text())
    return {
        tool["name"]: RecordedTool(
            tool["name"],
            tool["input_schema"],
            bool(tool["needs_permission"]),
            tool.get("refused") or "",
            _allow_rule_answers(tool),
        )
        for tool in doc["tools"]
        if tool["callable"]
    }


def old_names(path: Path = RECORDING_PATH) -> dict[str, str | None]:
    """Names older CLIs used: the tool each still stands for, or None when it is no tool now."""
    doc = json.loads(path.read_text())
    return {name: found["as"] for name, found in doc["old_names"].items()}
