"""Two machines: the server cannot see one file of the agent's, and decides on its facts.

The server runs in its own mount namespace with an empty tmpfs over the agent's whole
directory tree and another HOME. The real Claude Code CLI runs the hook bundle the
server serves, installed with its own `install` command, as a person's laptop would.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.claude_code.cli import curl_command, hook_settings, run_claude
from tests.fakes.anthropic_stream import ScriptedToolUse, fake_anthropic
from tests.live import ROOT, LiveServer, free_port, server_env, wait_for_port

pytestmark = [pytest.mark.claude_cli, pytest.mark.django_db(transaction=True)]


def _namespace_problem(hidden: Path) -> str | None:
    probe = ["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "tmpfs", str(hidden)]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare is not available: {exc}"
    return None if done.returncode == 0 else f"cannot make a mount namespace: {done.stderr.strip()}"


# ``unshare … sh -c SCRIPT HIDDEN CMD…``: CMD runs where HIDDEN is an empty tmpfs.
_ELSEWHERE = ["unshare", "--mount", "--propagation", "private", "sh", "-c", 'mount -t tmpfs tmpfs "$0" && exec "$@"']


@contextmanager
def server_elsewhere(hidden: Path) -> Iterator[LiveServer]:
    """Gatehouse in a mount namespace where ``hidden`` is an empty tmpfs and HOME is not the agent's."""
    port = free_port()
    log_path = ROOT / "var" / "test-logs" / f"server-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    daphne = [str(Path(sys.executable).parent / "daphne"), "-b", "127.0.0.1", "-p", str(port)]
    cmd = [*_ELSEWHERE, str(hidden)]
    env = server_env(HOME="/var/empty")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*cmd, *daphne, "gatehouse.asgi:application"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    live = LiveServer(port, process, log_path)
    try:
        wait_for_port(port, timeout=60, process=process)
        yield live
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture
def laptop(tmp_path: Path) -> Path:
    """The agent's machine: a home with a key, a project, and a link out of ``src``."""
    root = tmp_path / "laptop"
    (root / "home" / ".ssh").mkdir(parents=True)
    (root / "home" / ".ssh" / "id_rsa").write_text("-----BEGIN KEY-----\n")
    (root / "project" / "src").mkdir(parents=True)
    (root / "project" / "src" / "app.py").write_text("x = 1\n")
    (root / "outside").mkdir()
    (root / "project" / "src" / "link").symlink_to(root / "outside")
    return root


@pytest.fixture
def server(laptop: Path, ci_bot: Any, default_team: Any) -> Iterator[LiveServer]:
    problem = _namespace_problem(laptop)
    if problem:
        pytest.fail(f"two-machine test cannot run: {problem} (make test runs as root, which makes mount namespaces)")
    from approvals import services

    for text, behavior in (("Edit(src/**)", "allow"), ("Read(~/.ssh/**)", "deny")):
        services.rule_create(rule=text, behavior=behavior, source="projectSettings", team=default_team)
    # The recipe really hides the agent's files: the same namespace sees none of them.
    hidden = subprocess.run([*_ELSEWHERE, str(laptop), "test", "-e", str(laptop / "project")], check=False)
    assert hidden.returncode == 1
    with server_elsewhere(laptop) as live:
        yield live


def _installed_settings(server: LiveServer, laptop: Path) -> dict[str, Any]:
    bundle = laptop / "gatehouse-hook.pyz"
    with urllib.request.urlopen(server.url + "/agent/gatehouse-hook.pyz", timeout=30) as response:
        bundle.write_bytes(response.read())
    settings = laptop / "settings.json"
    install = [sys.executable, str(bundle), "install", "--server", server.url, "--settings", str(settings)]
    subprocess.run([*install, "--timeout", "5"], check=True, capture_output=True, cwd=laptop)
    doc = json.loads(settings.read_text())
    command = doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert f'sys.path.insert(0, "{bundle}")' in shlex.split(command)[4]
    return doc


def _claude(server: LiveServer, laptop: Path, token: str, call: ScriptedToolUse, first: Any = None) -> Any:
    settings = _installed_settings(server, laptop)
    with fake_anthropic(call, prelude=first) as fake:
        run_claude(fake, laptop / "home", laptop / "project", settings, token=token, timeout=180)
        return fake


def _requests(tool: str) -> list[Any]:
    from approvals.models import PermissionRequest

    return list(PermissionRequest.objects.filter(tool_name=tool).order_by("created_at"))


class TwoMachineTests:
    def test_it_runs_an_edit_of_a_file_only_the_agent_has(self, server: LiveServer, laptop: Path, ci_bot: Any) -> None:
        app = laptop / "project" / "src" / "app.py"
        read = ScriptedToolUse("Read", {"file_path": str(app)})
        edit = ScriptedToolUse("Edit", {"file_path": str(app), "old_string": "x = 1", "new_string": "x = 2"})
        fake = _claude(server, laptop, ci_bot.token, edit, read)
        assert app.read_text() == "x = 2\n", fake.tool_result_text()
        (request,) = _requests("Edit")
        assert request.state == "decided" and request.decision.behavior == "allow"
        assert request.facts["paths"][str(app)]["exists"] is True

    def test_it_denies_reading_a_key_under_the_agents_home(self, server: LiveServer, laptop: Path, ci_bot: Any) -> None:
        key = laptop / "home" / ".ssh" / "id_rsa"
        fake = _claude(server, laptop, ci_bot.token, ScriptedToolUse("Read", {"file_path": str(key)}))
        assert fake.tool_result_is_error() and "BEGIN KEY" not in fake.tool_result_text()
        (request,) = _requests("Read")
        assert request.decision.behavior == "deny" and request.facts["home"] == str(laptop / "home")

    def test_it_does_not_auto_allow_a_write_through_a_link_out_of_the_tree(
        self, server: LiveServer, laptop: Path, ci_bot: Any
    ) -> None:
        target = laptop / "project" / "src" / "link" / "new.py"
        fake = _claude(
            server, laptop, ci_bot.token, ScriptedToolUse("Write", {"file_path": str(target), "content": "y"})
        )
        assert not (laptop / "outside" / "new.py").exists(), fake.tool_result_text()
        (request,) = _requests("Write")
        assert request.evaluation["behavior"] == "ask"
        assert request.decision is None or request.decision.decided_by != "engine"

    def test_the_same_edit_over_curl_asks_for_want_of_facts(
        self, server: LiveServer, laptop: Path, ci_bot: Any
    ) -> None:
        app = laptop / "project" / "src" / "app.py"
        read = ScriptedToolUse("Read", {"file_path": str(app)})
        edit = ScriptedToolUse("Edit", {"file_path": str(app), "old_string": "x = 1", "new_string": "x = 2"})
        settings = hook_settings(curl_command(server.url, max_time=5), timeout=10)
        with fake_anthropic(edit, prelude=read) as fake:
            run_claude(fake, laptop / "home", laptop / "project", settings, token=ci_bot.token, timeout=180)
        assert app.read_text() == "x = 1\n"
        edits = _requests("Edit")
        assert edits and edits[0].evaluation["behavior"] == "ask"
        assert "the agent did not report" in edits[0].evaluation["message"]
