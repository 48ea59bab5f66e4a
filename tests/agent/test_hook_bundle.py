"""The hook as one file served by Gatehouse, installed on a machine without the checkout."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.claude_code.hookrun import hook_input
from tests.live import live_server

pytestmark = pytest.mark.django_db(transaction=True)


def _download(url: str, to: Path) -> Path:
    with urllib.request.urlopen(url + "/agent/gatehouse-hook.pyz", timeout=30) as response:
        to.write_bytes(response.read())
    return to


class HookBundleTests:
    def test_it_installs_settings_valid_here_and_decides_as_the_hook(
        self, tmp_path: Path, ci_bot: Any, default_team: Any
    ) -> None:
        from approvals import services
        from approvals.models import PermissionRequest

        services.rule_create(rule="Bash(ls:*)", behavior="allow", source="userSettings", team=default_team)
        elsewhere = tmp_path / "laptop"  # no checkout here: only the bundle
        elsewhere.mkdir()
        with live_server() as srv:
            bundle = _download(srv.url, elsewhere / "gatehouse-hook.pyz")
            settings_path = elsewhere / "claude" / "settings.json"
            settings_path.parent.mkdir()
            settings_path.write_text(json.dumps({"permissions": {"allow": ["Read"]}}))
            installed = subprocess.run(
                [sys.executable, str(bundle), "install", "--server", srv.url, "--settings", str(settings_path)],
                cwd=elsewhere,
                capture_output=True,
                text=True,
                check=True,
            )
            settings = json.loads(settings_path.read_text())
            assert settings["permissions"] == {"allow": ["Read"]}, installed.stdout
            command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            argv = shlex.split(command)
            assert argv[:2] == [sys.executable, str(bundle)] and Path(argv[1]).exists()
            body = hook_input("PreToolUse", "ls -la", cwd=str(elsewhere))
            env = {"GATEHOUSE_TOKEN": ci_bot.token, "PATH": "/usr/bin:/bin", "HOME": str(elsewhere)}
            done = subprocess.run(
                argv, input=json.dumps(body), cwd=elsewhere, capture_output=True, text=True, env=env, timeout=60
            )
        assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "allow", done.stderr
        stored = PermissionRequest.objects.get(tool_use_id=body["tool_use_id"])
        assert stored.facts is not None and stored.facts["home"] == str(elsewhere)
        assert str(elsewhere) in stored.facts["paths"]

    def test_its_install_waits_past_the_longest_deadline_of_the_server_that_served_it(
        self, tmp_path: Path, default_team: Any
    ) -> None:
        from agent.install import DEADLINE_MARGIN, TIMEOUT_MARGIN
        from approvals import services

        services.team_settings_update(team=default_team, ask_timeout=1800)
        with live_server() as srv:
            bundle = _download(srv.url, tmp_path / "gatehouse-hook.pyz")
        settings_path = tmp_path / "settings.json"
        subprocess.run(
            [sys.executable, str(bundle), "install", "--server", srv.url, "--settings", str(settings_path)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        entry = json.loads(settings_path.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]
        waits = 1800 + DEADLINE_MARGIN
        argv = shlex.split(entry["command"])
        assert argv[argv.index("--timeout") + 1] == str(waits)
        assert entry["timeout"] == waits + TIMEOUT_MARGIN  # Claude Code outwaits the hook

    def test_it_replaces_an_earlier_gatehouse_hook_and_keeps_others(self, tmp_path: Path) -> None:
        from agent.install import EVENTS, with_ours

        theirs = {"type": "command", "command": "lint.sh"}
        old = {"type": "command", "command": "python3 /srv/gatehouse/agent/hook.py --server x"}
        doc = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [theirs]}, {"matcher": "*", "hooks": [old]}]}}
        result = with_ours(doc, EVENTS, "python3 /home/a/gatehouse-hook.pyz --server y", 330)
        commands = [h["command"] for g in result["hooks"]["PreToolUse"] for h in g["hooks"]]
        assert commands == ["lint.sh", "python3 /home/a/gatehouse-hook.pyz --server y"]
        assert result["hooks"]["PreToolUse"][-1]["hooks"][0]["onFailure"] == "block"
