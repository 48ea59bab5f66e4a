"""``python -m policy decide`` and ``python -m policy lint`` through a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "policy", *args],
        input=stdin,
        text=True,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


class CliDecideTests:
    def test_it_prints_the_decision_as_json(self) -> None:
        doc: dict[str, Any] = {
            "tool_name": "Bash",
            "tool_input": {"command": "git status && rm -rf ~"},
            "cwd": "/srv/p",
            "rules": [
                {"rule": "Bash(git status:*)", "behavior": "allow", "source": "projectSettings"},
                {"source": "policySettings", "permissions": {"deny": ["Bash(rm:*)"]}},
            ],
        }
        result = _run(["decide"], json.dumps(doc))
        assert result.returncode == 0, result.stderr
        output = json.loads(result.stdout)
        assert output["behavior"] == "deny"
        assert output["reason"] == {
            "type": "rule",
            "rule": "Bash(rm:*)",
            "source": "policySettings",
            "behavior": "deny",
        }
        assert {"layer": "denyRules", "result": "deny", "rule": "Bash(rm:*)", "source": "policySettings"} in output[
            "trace"
        ]
        assert set(output) >= {"message", "updated_input", "warnings", "suggested_rules"}

    def test_it_resolves_headless_asks_to_deny(self) -> None:
        doc = {"tool_name": "Bash", "tool_input": {"command": "make"}, "context": "headless"}
        assert json.loads(_run(["decide"], json.dumps(doc)).stdout)["behavior"] == "deny"

    def test_it_exits_2_on_malformed_json(self) -> None:
        result = _run(["decide"], "{not json")
        assert result.returncode == 2
        assert "not valid JSON" in result.stderr
        assert result.stdout == ""


class CliLintTests:
    def test_it_exits_1_with_findings(self, tmp_path: Path) -> None:
        path = tmp_path / "settings.json"
        path.write_text(json.dumps({"permissions": {"allow": ["Bash(git *", "Bash(ls)", "Bash(ls)"]}}))
        result = _run(["lint", str(path)])
        assert result.returncode == 1
        assert "unbalanced parenthesis" in result.stdout
        assert "duplicate" in result.stdout

    def test_it_exits_0_for_a_clean_file(self, tmp_path: Path) -> None:
        path = tmp_path / "settings.json"
        path.write_text(json.dumps({"permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(.env)"]}}))
        result = _run(["lint", str(path)])
        assert result.returncode == 0, result.stdout
        assert "no findings" in result.stdout
