"""The scripted example agent runs end to end against a real Gatehouse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agent.sdk_support import add_rule, gatehouse
from tests.live import ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]
__all__ = ["gatehouse"]


class ScriptedExampleTests:
    def test_it_plays_the_script_and_prints_each_tool_result(
        self, gatehouse: Any, registered_agent: Any, tmp_path: Path
    ) -> None:
        editor = registered_agent("editor-bot", "acceptEdits")  # the script runs in acceptEdits
        add_rule("Bash(ls:*)", "allow")
        env = {**os.environ, "GATEHOUSE_URL": gatehouse.url, "GATEHOUSE_TOKEN": editor.token}
        done = subprocess.run(
            [sys.executable, "-m", "examples.scripted_agent", "--cwd", str(tmp_path / "demo"), "--mode", "acceptEdits"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            check=True,
        )
        blocks = [json.loads(line) for line in done.stdout.splitlines()]
        assert [b.get("is_error", False) for b in blocks] == [False] * 5 + [True, True]
        assert (tmp_path / "demo" / "hello.py").read_text() == "print('hello, gatehouse')\n"
        assert "hello.py" in blocks[4]["content"]
        assert "`command` is required but missing" in blocks[5]["content"]
        assert blocks[6]["content"] == "<tool_use_error>Error: No such tool available: SummonDragon</tool_use_error>"
