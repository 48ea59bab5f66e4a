"""install_claude_hooks, import_claude_settings and export_claude_settings."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db

EXISTING: dict[str, Any] = {
    "model": "opus",
    "env": {"FOO": "1"},
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter --check"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def install(path: Path, *args: str) -> dict[str, Any]:
    call_command(
        "install_claude_hooks", "--settings", str(path), "--server", "http://gh.test:8000", *args, stdout=StringIO()
    )
    return json.loads(path.read_text())


def our_commands(doc: dict[str, Any]) -> list[str]:
    return [
        h["command"]
        for groups in doc.get("hooks", {}).values()
        for group in groups
        for h in group["hooks"]
        if "from agent.hook import main" in h["command"] or "/hooks/claude-code" in h["command"]
    ]


class InstallClaudeHooksTests:
    def test_it_writes_the_hooks_hash_checked_bytecode_with_the_python_that_runs_it(self, tmp_path: Path) -> None:
        import importlib.util

        from django.conf import settings

        agent = Path(settings.BASE_DIR) / "agent"
        for module in ("hook", "facts"):
            pyc = Path(importlib.util.cache_from_source(str(agent / f"{module}.py")))
            pyc.unlink(missing_ok=True)
        install(tmp_path / "settings.json")
        for module in ("hook", "facts"):
            source = (agent / f"{module}.py").read_bytes()
            data = Path(importlib.util.cache_from_source(str(agent / f"{module}.py"))).read_bytes()
            # This Python's magic; flags 0b11: hash-based and checked against the source (PEP 552).
            assert data[:4] == importlib.util.MAGIC_NUMBER
            assert int.from_bytes(data[4:8], "little") == 0b11
            assert data[8:16] == importlib.util.source_hash(source)

    def test_it_says_to_migrate_when_the_database_has_no_tables(self, tmp_path: Path) -> None:
        import os
        import subprocess
        import sys

        from django.conf import settings

        env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'empty.sqlite3'}"}
        command = [sys.executable, "manage.py", "install_claude_hooks", "--settings", str(tmp_path / "s.json")]
        done = subprocess.run(
            [*command, "--server", "http://gh.test:8000"],
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1, done.stderr
        assert "manage.py migrate" in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert not (tmp_path / "s.json").exists()

    def test_it_warns_when_the_hooks_python_cannot_write_its_bytecode(self, tmp_path: Path) -> None:
        err = StringIO()
        call_command(
            "install_claude_hooks",
            "--settings",
            str(tmp_path / "settings.json"),
            "--server",
            "http://gh.test:8000",
            "--python",
            str(tmp_path / "no-such-python"),
            stdout=StringIO(),
            stderr=err,
        )
        assert "could not write the hook's bytecode" in err.getvalue()
        assert our_commands(json.loads((tmp_path / "settings.json").read_text()))  # installed all the same

    def test_it_adds_our_hooks_and_keeps_everything_else(self, tmp_path: Path) -> None:
        path = tmp_path / "settings.json"
        path.write_text(json.dumps(EXISTING))
        doc = install(path)
        assert doc["model"] == "opus" and doc["env"] == {"FOO": "1"} and doc["permissions"] == EXISTING["permissions"]
        assert doc["hooks"]["Stop"] == EXISTING["hooks"]["Stop"]
        assert doc["hooks"]["PreToolUse"][0] == EXISTING["hooks"]["PreToolUse"][0]
        assert set(doc["hooks"]) == {
            "PreToolUse",
            "PermissionRequest",
            "PostToolUse",
            "PostToolUseFailure",
            "PermissionDenied",
            "Stop",
        }
        ours = doc["hooks"]["PreToolUse"][1]["hooks"][0]
        # The hook outwaits the longest deadline (300 s by default), so it hears the deadline's answer.
        assert "--server http://gh.test:8000" in ours["command"] and "--timeout 315" in ours["command"]
        # Claude Code's own timeout outlives the hook's, or a slow answer becomes "no decision".
        assert ours["timeout"] > 315

    def test_the_hook_outwaits_the_longest_deadline_a_team_or_rule_sets(self, tmp_path: Path) -> None:
        from approvals import services

        team = services.default_team()
        services.team_settings_update(team=team, ask_timeout=900)
        services.rule_create(rule="Bash(rm:*)", behavior="ask", source="localSettings", team=team, ask_timeout=1200)
        path = tmp_path / "settings.json"
        ours = install(path)["hooks"]["PreToolUse"][0]["hooks"][0]
        assert "--timeout 1215" in ours["command"] and ours["timeout"] > 1215

    def test_it_is_idempotent(self, tmp_path: Path) -> None:
        path = tmp_path / "settings.json"
        path.write_text(json.dumps(EXISTING))
        first = install(path)
        second = install(path, "--timeout", "120")
        assert len(our_commands(second)) == len(our_commands(first)) == 5
        assert all("--timeout 120" in c for c in our_commands(second))

    def test_it_uninstalls_only_ours(self, tmp_path: Path) -> None:
        path = tmp_path / "settings.json"
        path.write_text(json.dumps(EXISTING))
        install(path)
        call_command("install_claude_hooks", "--settings", str(path), "--uninstall", stdout=StringIO())
        assert json.loads(path.read_text()) == EXISTING

    def test_it_creates_a_missing_file_with_chosen_events(self, tmp_path: Path) -> None:
        path = tmp_path / ".claude" / "settings.local.json"
        doc = install(path, "--events", "PermissionRequest", "--curl")
        assert list(doc["hooks"]) == ["PermissionRequest"]
        assert our_commands(doc)[0].startswith("curl -sS --max-time 315")

    def test_it_refuses_to_overwrite_invalid_json(self, tmp_path: Path) -> None:
        path = tmp_path / "settings.json"
        path.write_text("{not json")
        with pytest.raises(CommandError, match="not valid JSON"):
            install(path)
        assert path.read_text() == "{not json"


class ImportClaudeSettingsTests:
    def test_it_imports_rules_once(self, tmp_path: Path, default_team: Any) -> None:
        from approvals.models import Rule

        path = tmp_path / "settings.json"
        path.write_text(json.dumps({"permissions": {"allow": ["Bash(npm run build)"], "deny": ["Read(~/.ssh/**)"]}}))
        call_command("import_claude_settings", str(path), "--source", "projectSettings", stdout=StringIO())
        call_command("import_claude_settings", str(path), "--source", "projectSettings", stdout=StringIO())
        rules = {(r.rule, r.behavior, r.source) for r in Rule.objects.all()}
        assert rules == {
            ("Bash(npm run build)", "allow", "projectSettings"),
            ("Read(~/.ssh/**)", "deny", "projectSettings"),
        }
        assert Rule.objects.count() == 2

    def test_one_bad_rule_imports_none(self, tmp_path: Path, default_team: Any) -> None:
        from approvals.models import Rule

        path = tmp_path / "settings.json"
        path.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)", "Bash(unclosed"]}}))
        with pytest.raises(CommandError):
            call_command("import_claude_settings", str(path), "--source", "userSettings", stdout=StringIO())
        assert Rule.objects.count() == 0


class ExportClaudeSettingsTests:
    def test_it_writes_rules_back_in_claude_codes_shape(self, tmp_path: Path, default_team: Any) -> None:
        from approvals import services

        services.rule_create(rule="Bash(git status)", behavior="allow", source="userSettings", team=default_team)
        services.rule_create(rule="Bash(rm:*)", behavior="deny", source="policySettings", team=default_team)
        services.rule_create(
            rule="Bash(ls)", behavior="allow", source="session", team=default_team, scope="session", session_id="s1"
        )
        path = tmp_path / "settings.json"
        path.write_text(json.dumps({"model": "opus", "permissions": {"defaultMode": "acceptEdits", "allow": ["X"]}}))
        call_command("export_claude_settings", "--output", str(path), stdout=StringIO())
        doc = json.loads(path.read_text())
        assert doc["model"] == "opus"
        assert doc["permissions"]["allow"] == ["Bash(git status)"]
        assert doc["permissions"]["deny"] == ["Bash(rm:*)"]
        assert doc["permissions"]["defaultMode"] == "acceptEdits"
