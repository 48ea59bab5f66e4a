"""What the installer writes is what Claude Code 2.1.332 honours: `onFailure: "block"`.

With it, a hook that fails blocks the call; without it, the call runs unreviewed; with
a misspelt value Claude Code drops the whole settings file (its allow rule is gone).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tests.e2e.claude_code.cli import claude_bin, run_claude
from tests.fakes.anthropic_stream import ScriptedToolUse, fake_anthropic

pytestmark = [pytest.mark.claude_cli, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True, scope="module")
def _claude_installed() -> None:
    if not os.path.exists(claude_bin()):
        pytest.fail(f"the Claude Code CLI is missing at {claude_bin()}: `make test` installs it")


def installed_with_a_failing_hook(tmp_path: Path, on_failure: str | None) -> dict[str, Any]:
    import io
    import json

    path = tmp_path / "settings.json"
    call_command("install_claude_hooks", "--settings", str(path), "--events", "PreToolUse", stdout=io.StringIO())
    doc = json.loads(path.read_text())
    entry = doc["hooks"]["PreToolUse"][0]["hooks"][0]
    assert entry["onFailure"] == "block"  # what the installer writes
    entry["command"] = "exit 1"  # the hook fails (as a crash or a missing Python would)
    if on_failure is None:
        del entry["onFailure"]
    else:
        entry["onFailure"] = on_failure
    doc["permissions"] = {"allow": ["Bash(touch:*)"]}
    return doc


class ClaudeOnFailureTests:
    @pytest.mark.parametrize(
        ("on_failure", "runs", "says"),
        [
            ("block", False, 'blocking because onFailure is "block"'),
            (None, True, ""),
            ("blok", False, "needs approval"),  # the file was dropped: its allow rule too
        ],
    )
    def test_the_installers_on_failure_blocks_a_failing_hook(
        self, tmp_path: Path, on_failure: str | None, runs: bool, says: str
    ) -> None:
        project = tmp_path / "project"
        project.mkdir()
        marker = project / "marker"
        settings = installed_with_a_failing_hook(tmp_path, on_failure)
        with fake_anthropic(ScriptedToolUse("Bash", {"command": f"touch {marker}", "description": "m"})) as fake:
            run = run_claude(fake, tmp_path / "home", project, settings, token="unused")
        assert run.returncode == 0, run.stderr
        assert marker.exists() == runs, fake.tool_result_text()
        assert says in fake.tool_result_text()

    def test_stdout_that_is_not_json_is_no_failure_the_call_runs(self, tmp_path: Path) -> None:
        """Why the hook prints nothing but its JSON: a hook that exits 0 with other text on
        stdout has not failed, so `onFailure: "block"` does not stop the call — Claude Code
        carries on as if there were no hook (here its allow rule runs the call)."""
        project = tmp_path / "project"
        project.mkdir()
        marker = project / "marker"
        settings = installed_with_a_failing_hook(tmp_path, "block")
        settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"] = "echo 'Gatehouse: deny'"
        with fake_anthropic(ScriptedToolUse("Bash", {"command": f"touch {marker}", "description": "m"})) as fake:
            run = run_claude(fake, tmp_path / "home", project, settings, token="unused")
        assert run.returncode == 0, run.stderr
        assert marker.exists(), fake.tool_result_text()
