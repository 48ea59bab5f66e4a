"""The hook as one file served by Gatehouse, installed on a machine without the checkout."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import urllib.request
import zipfile
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
            assert argv[:4] == [sys.executable, "-I", "-S", "-c"] and f'sys.path.insert(0, "{bundle}")' in argv[4]
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


def _served_bundle(client: Any, to: Path) -> Path:
    """The bundle as the server serves it (the view's own bytes), saved where a laptop keeps it."""
    response = client.get("/agent/gatehouse-hook.pyz")
    assert response.status_code == 200
    to.write_bytes(response.content)
    return to


def _installed_bundle(client: Any, tmp_path: Path) -> Path:
    bundle = _served_bundle(client, tmp_path / "gatehouse-hook.pyz")
    settings_path = tmp_path / "settings.json"
    done = subprocess.run(
        [sys.executable, str(bundle), "install", "--server", "http://127.0.0.1:9", "--settings", str(settings_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "could not be rewritten" not in done.stderr, done.stderr
    return bundle


# Run in a fresh interpreter: the bundle's hook as Claude Code runs it, with `compile` made
# to fail for anything from the bundle, and `-X importtime` naming every module it loads.
_RUN_GUARDED = """
import builtins, runpy, sys
bundle = sys.argv[1]
real_compile = builtins.compile
def guarded(source, filename, *args, **kwargs):
    if str(filename).startswith(bundle):
        raise AssertionError(f"compiled {filename} from source")
    return real_compile(source, filename, *args, **kwargs)
builtins.compile = guarded
sys.argv = sys.argv[1:]
runpy.run_path(bundle, run_name="__main__")
"""


def _imported(stderr: str) -> set[str]:
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def _import_from(bundle: Path, module: str, attribute: str) -> subprocess.CompletedProcess[str]:
    """Import `module` from the bundle in a fresh interpreter; print whether it has `attribute`."""
    code = f"import sys; sys.path.insert(0, {str(bundle)!r}); import {module} as m; print(hasattr(m, {attribute!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def _rewritten(bundle: Path, change: Any) -> None:
    """Rewrite the bundle's entries through `change(name, data) -> data`."""
    with zipfile.ZipFile(bundle) as old:
        entries = {name: change(name, old.read(name)) for name in old.namelist()}
    with zipfile.ZipFile(bundle, "w") as new:
        for name, data in entries.items():
            new.writestr(name, data)


class HookBundleBytecodeTests:
    def test_a_hook_run_of_the_installed_bundle_compiles_nothing_and_never_loads_the_installer(
        self, client: Any, tmp_path: Path
    ) -> None:
        bundle = _installed_bundle(client, tmp_path)
        with zipfile.ZipFile(bundle) as zipped:
            names = set(zipped.namelist())
        assert {"__main__.pyc", "agent/__init__.pyc", "agent/hook.pyc", "agent/facts.pyc"} <= names
        body = hook_input("PreToolUse", "ls -la", cwd=str(tmp_path))
        # Port 9 (discard) is closed here: the hook runs its whole way and asks, unreachable.
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", _RUN_GUARDED, str(bundle), "--server", "http://127.0.0.1:9"],
            input=json.dumps(body),
            capture_output=True,
            text=True,
            timeout=60,
            env={"GATEHOUSE_TOKEN": "gha_unused", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        )
        assert "compiled" not in done.stderr, done.stderr
        answer = json.loads(done.stdout)["hookSpecificOutput"]
        assert answer["permissionDecision"] == "ask" and "unreachable" in answer["permissionDecisionReason"], (
            done.stdout
        )
        imported = _imported(done.stderr)
        assert {"agent.hook", "agent.facts"} <= imported
        assert not imported & {"agent.install", "argparse", "zipfile", "tempfile", "pathlib"}

    @pytest.mark.parametrize("tampering", ["source changed after install", "bytecode of another Python"])
    def test_bytecode_runs_only_for_the_very_source_it_was_compiled_from(
        self, client: Any, tmp_path: Path, tampering: str
    ) -> None:
        bundle = _installed_bundle(client, tmp_path)
        with zipfile.ZipFile(bundle) as zipped:
            header = zipped.read("agent/facts.pyc")[:16]
        assert int.from_bytes(header[4:8], "little") == 0b11  # hash-based, and checked against the source
        marker = "FROM_SOURCE"

        def change(name: str, data: bytes) -> bytes:
            if tampering == "source changed after install" and name == "agent/facts.py":
                return data + f"\n{marker} = True\n".encode()
            if tampering == "bytecode of another Python" and name == "agent/facts.pyc":
                return b"\x00\x00" + data[2:]
            return data

        _rewritten(bundle, change)
        # The edited source runs, not the bytecode of the source before it; a foreign
        # Python's bytecode is passed over for the source.
        assert _import_from(bundle, "agent.facts", marker).stdout.strip() == str(tampering.startswith("source"))
        assert _import_from(bundle, "agent.facts", "gather").stdout.strip() == "True"

    def test_a_file_that_is_not_a_bundle_is_left_as_it_was(self, tmp_path: Path) -> None:
        from agent.install import add_bytecode

        not_a_zip = tmp_path / "gatehouse-hook.pyz"
        not_a_zip.write_bytes(b"#!/bin/sh\necho not a bundle\n")
        assert add_bytecode(not_a_zip) is False
        assert not_a_zip.read_bytes() == b"#!/bin/sh\necho not a bundle\n"
        assert [p.name for p in tmp_path.iterdir()] == ["gatehouse-hook.pyz"]

    def test_a_link_to_the_bundle_stays_a_link_and_its_target_gets_the_bytecode(
        self, client: Any, tmp_path: Path
    ) -> None:
        from agent.install import add_bytecode

        target = _served_bundle(client, tmp_path / "gatehouse-hook-1.2.pyz")
        link = tmp_path / "gatehouse-hook.pyz"
        link.symlink_to(target.name)
        assert add_bytecode(link) is True
        assert link.is_symlink() and link.resolve() == target
        with zipfile.ZipFile(target) as zipped:
            assert "agent/hook.pyc" in zipped.namelist()
