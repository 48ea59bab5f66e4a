"""`manage.py install_claude_hooks --settings FILE`, exactly as the README says, as a process.

`call_command` skips the command line Django parses first, which once hid that Django
read `--settings FILE` as its settings module and crashed.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.claude_code.hookrun import ROOT

# The server's database, migrated as `make run` leaves it: the installer reads its deadlines.
SERVER_DB: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def server_database(tmp_path_factory: pytest.TempPathFactory) -> None:
    SERVER_DB["url"] = f"sqlite:///{tmp_path_factory.mktemp('server') / 'gatehouse.sqlite3'}"
    migrated = manage("migrate", "--noinput", "-v", "0", home=tmp_path_factory.mktemp("home"))
    assert migrated.returncode == 0, migrated.stderr


def manage(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["HOME"] = str(home)
    env["DATABASE_URL"] = SERVER_DB["url"]
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def our_entries(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {event: groups[-1]["hooks"][0] for event, groups in doc["hooks"].items()}


class InstallAsDocumentedTests:
    @pytest.mark.parametrize("spelling", [["--settings", "{path}"], ["--settings={path}"]])
    def test_the_readme_command_works_as_written(self, tmp_path: Path, spelling: list[str]) -> None:
        path = tmp_path / ".claude" / "settings.json"
        token = tmp_path / "token"
        token.write_text("gha_x")
        words = [word.format(path=path) for word in spelling]
        done = manage(
            "install_claude_hooks",
            *words,
            "--server",
            "http://127.0.0.1:8000",
            "--token-file",
            str(token),
            home=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        entries = our_entries(json.loads(path.read_text()))
        assert set(entries) == {
            "PreToolUse",
            "PermissionRequest",
            "PostToolUse",
            "PostToolUseFailure",
            "PermissionDenied",
        }
        assert entries["PreToolUse"]["onFailure"] == "block" and entries["PermissionRequest"]["onFailure"] == "block"
        assert "--server http://127.0.0.1:8000" in entries["PreToolUse"]["command"]
        # Runs from anywhere, isolated: the checkout by its absolute path, not `-m agent.hook`
        # from a working directory.
        argv = shlex.split(entries["PreToolUse"]["command"].removeprefix(f"GATEHOUSE_TOKEN_FILE={token} "))
        assert argv[1:4] == ["-I", "-S", "-c"] and f'sys.path.insert(0, "{ROOT}")' in argv[4]

    def test_djangos_own_settings_option_still_works_for_other_commands(self, tmp_path: Path) -> None:
        done = manage("check", "--settings", "gatehouse.settings", home=tmp_path)
        assert done.returncode == 0, done.stderr

    def test_uninstall_as_written(self, tmp_path: Path) -> None:
        path = tmp_path / "settings.json"
        path.write_text(json.dumps({"model": "opus"}))
        assert manage("install_claude_hooks", "--settings", str(path), home=tmp_path).returncode == 0
        done = manage("install_claude_hooks", "--settings", str(path), "--uninstall", home=tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads(path.read_text()) == {"model": "opus", "hooks": {}} or json.loads(path.read_text()) == {
            "model": "opus"
        }
