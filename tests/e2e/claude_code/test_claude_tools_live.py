"""A live sample of the tool recording: the real CLI still offers and asks as recorded.

The registry (`policy.tools`) is built from `policy/tools/claude-code-2.1.332-tools.json`.
Each run starts Claude Code once with its default tools and compares their names and
input keys with the recording, then calls a few tools again (some that need permission,
some that do not, picked by the day; `GATEHOUSE_TOOLS_ORACLE_SEED` repeats one) and
compares whether it asked. A difference means the recording has rotted: re-record it
(the command is in the failure).
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

import pytest

from policy.tools import recording
from tests.e2e.claude_code.cli import claude_bin
from tests.policy.tools_oracle import cli, record
from tests.policy.tools_oracle.probes import probes

pytestmark = [pytest.mark.claude_cli]

PER_KIND = 3
RECORDED: dict[str, Any] = {tool["name"]: tool for tool in json.loads(recording.RECORDING_PATH.read_text())["tools"]}


def _cli_installed() -> None:
    if not os.path.exists(claude_bin()):
        pytest.fail(f"the Claude Code CLI is missing at {claude_bin()}: `make test` installs it")


def sample(seed: int) -> list[str]:
    """PER_KIND tools that need permission and PER_KIND that do not."""
    rng = random.Random(seed)
    callable_tools = [tool for tool in RECORDED.values() if tool["callable"] and not tool.get("refused")]
    asking = sorted(t["name"] for t in callable_tools if t["needs_permission"])
    free = sorted(t["name"] for t in callable_tools if not t["needs_permission"])
    return sorted(rng.sample(asking, PER_KIND) + rng.sample(free, PER_KIND))


def _keys(schema: dict[str, Any]) -> tuple[list[str], list[str]]:
    return sorted(schema.get("properties") or {}), sorted(schema.get("required") or [])


def live_behavior(name: str) -> str:
    """What the CLI does now with the probe the recording says decided the tool."""
    tool = RECORDED[name]
    tried = probes(name, tool["input_schema"])
    index = next((i for i, p in enumerate(tool["probes"]) if p["claude"]["behavior"] == "ask"), 0)
    offer = next(o for o in cli.OFFERS if o.name == tool["called_with"])
    return str(record.outcome(offer, name, tried[index])["behavior"])


class ClaudeToolsLiveTests:
    def test_the_default_tools_are_the_recorded_ones(self) -> None:
        _cli_installed()
        assert cli.version() == recording.CLAUDE_CODE_VERSION
        run = cli.run(cli.OFFERS[0])
        offered = run.tools()
        live = sorted([*offered, *run.deferred()])
        recorded = sorted(name for name, tool in RECORDED.items() if tool["offered"] == "default")
        assert live == recorded, f"re-record with `{record.RECORD_COMMAND}`"
        for name, tool in offered.items():
            assert _keys(tool["input_schema"]) == _keys(RECORDED[name]["input_schema"]), name

    def test_a_sample_of_tools_still_asks_as_recorded(self) -> None:
        _cli_installed()
        seed = int(os.environ.get("GATEHOUSE_TOOLS_ORACLE_SEED") or time.time() // 86400)
        names = sample(seed)
        live = dict(zip(names, record.in_parallel(live_behavior, names, 3), strict=True))
        recorded = {name: "ask" if RECORDED[name]["needs_permission"] else "allow" for name in names}
        assert live == recorded, (
            f"Claude Code no longer asks as recorded (GATEHOUSE_TOOLS_ORACLE_SEED={seed}); "
            f"re-record with `{record.RECORD_COMMAND}`"
        )
