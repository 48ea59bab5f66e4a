"""Run the recorded cases through ``policy.decide`` and compare with Claude Code's outcomes.

Strictness orders the outcomes allow < ask < deny: Gatehouse is *looser* on a case where
it answers lower than Claude Code did (it allows what Claude Code asks about or denies,
or asks where Claude Code denies), *stricter* where it answers higher.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from policy import decide
from policy.rules import CompiledRules, compile_rules

CLAUDE_CODE_VERSION = "2.1.332"
RECORDING = Path(__file__).resolve().parent / f"claude-code-{CLAUDE_CODE_VERSION}.json"
RANK = {"allow": 0, "ask": 1, "deny": 2}
# Settings given with `--settings` are Claude Code's flagSettings.
SOURCE = "flagSettings"


@dataclass(frozen=True)
class Disagreement:
    id: str
    claude: str
    gatehouse: str

    @property
    def looser(self) -> bool:
        return RANK[self.gatehouse] < RANK[self.claude]

    def __str__(self) -> str:
        side = "LOOSER" if self.looser else "stricter"
        return f"{self.id}: Claude Code {self.claude}, Gatehouse {self.gatehouse} ({side})"


@cache
def load(path: Path = RECORDING) -> dict[str, Any]:
    recording: dict[str, Any] = json.loads(path.read_text())
    return recording


@cache
def _rules(setting: str, path: Path = RECORDING) -> CompiledRules:
    permissions = load(path)["settings"][setting]["permissions"]
    return compile_rules([{"source": SOURCE, "permissions": permissions}])


def engine_input(case: dict[str, Any], path: Path = RECORDING) -> dict[str, Any]:
    """The ``decide`` document for a recorded case: the same call, rules, directories and facts."""
    setting = load(path)["settings"][case["setting"]]
    return {
        "tool_name": case["tool_name"],
        "tool_input": case["tool_input"],
        "cwd": case["cwd"],
        "additional_directories": setting["additional_directories"],
        "mode": case["mode"],
        "context": "interactive",
        "facts": case["facts"],
    }


def gatehouse(case: dict[str, Any], path: Path = RECORDING) -> str:
    return decide(engine_input(case, path), rules=_rules(case["setting"], path)).behavior


def comparable(path: Path = RECORDING) -> list[dict[str, Any]]:
    """The cases Claude Code decided (not the few it rejected as invalid input first)."""
    return [c for c in load(path)["cases"] if c["claude"]["behavior"] in RANK]


@cache
def disagreements(path: Path = RECORDING) -> tuple[Disagreement, ...]:
    """Every case where ``policy.decide`` answers differently (computed once per run)."""
    out = []
    for case in comparable(path):
        ours = gatehouse(case, path)
        if ours != case["claude"]["behavior"]:
            out.append(Disagreement(case["id"], case["claude"]["behavior"], ours))
    return tuple(out)
