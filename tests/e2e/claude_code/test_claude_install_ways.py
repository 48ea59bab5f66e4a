"""Each way `install_claude_hooks` wires Claude Code 2.1.332 to Gatehouse, run for real.

- `--transport http`: a native `type: "http"` hook. Claude Code posts the hook input
  itself (no process per call), so no agent facts arrive, and it fails closed.
- `--gate permission-request`: Gatehouse hears only what Claude Code would prompt for.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tests.e2e.claude_code.cli import claude_bin, run_claude
from tests.e2e.claude_code.hookrun import pending_request, wait_until
from tests.fakes.anthropic_stream import ScriptedToolUse, fake_anthropic
from tests.live import LiveServer, free_port, live_server

pytestmark = [pytest.mark.claude_cli, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True, scope="module")
def _claude_installed() -> None:
    if not os.path.exists(claude_bin()):
        pytest.fail(f"the Claude Code CLI is missing at {claude_bin()}: `make test` installs it")


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    with django_db_blocker.unblock(), live_server() as srv:
        yield srv


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def installed(tmp_path: Path, *args: str) -> dict[str, Any]:
    path = tmp_path / "settings.json"
    call_command("install_claude_hooks", "--settings", str(path), *args, stdout=io.StringIO())
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def allow_when_pending(user: Any) -> threading.Thread:
    from approvals import services

    def answer() -> None:
        request = wait_until(pending_request, timeout=60, what="a pending request")
        services.request_decide(request.pk, services.Answer(behavior="allow", surface="api", user=user))

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return thread


class HttpTransportTests:
    def test_claude_code_posts_itself_and_a_person_answers(
        self, server: LiveServer, project: Path, tmp_path: Path, ci_bot: Any, alice: Any, default_team: Any
    ) -> None:
        from approvals import services
        from approvals.models import Decision

        settings = installed(tmp_path, "--server", server.url, "--transport", "http", "--timeout", "60")
        entry = settings["hooks"]["PreToolUse"][0]["hooks"][0]
        assert entry["type"] == "http" and entry["onFailure"] == "block"
        # A path rule would allow this edit with facts; an http hook carries none: it asks.
        services.rule_create(rule="Write(src/**)", behavior="allow", source="projectSettings", team=default_team)
        target = project / "src" / "app.py"
        call = ScriptedToolUse("Write", {"file_path": str(target), "content": "print(1)\n"})
        approver = allow_when_pending(alice)
        with fake_anthropic(call) as fake:
            run = run_claude(fake, tmp_path / "home", project, settings, token=ci_bot.token)
        approver.join(timeout=5)
        assert run.returncode == 0, run.stderr
        assert target.read_text() == "print(1)\n", fake.tool_result_text()
        [row] = Decision.objects.select_related("request")
        assert (row.reason_type, row.decided_by) == ("user", "alice")
        assert row.request.facts is None
        assert row.request.result is not None and row.request.result["ok"]  # PostToolUse over http too

    def test_an_unreachable_server_blocks_the_call(self, project: Path, tmp_path: Path, ci_bot: Any) -> None:
        down = f"http://127.0.0.1:{free_port()}"
        settings = installed(tmp_path, "--server", down, "--transport", "http", "--timeout", "5")
        settings["permissions"] = {"allow": ["Bash(touch:*)"]}
        call = ScriptedToolUse("Bash", {"command": f"touch {project}/marker", "description": "Create the marker"})
        with fake_anthropic(call) as fake:
            run = run_claude(fake, tmp_path / "home", project, settings, token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        assert not (project / "marker").exists()
        assert fake.tool_result_is_error(), fake.tool_result_text()


class PermissionRequestGateTests:
    def test_gatehouse_hears_only_what_claude_code_would_prompt_for(
        self, server: LiveServer, project: Path, tmp_path: Path, ci_bot: Any, alice: Any
    ) -> None:
        from approvals.models import Decision, PermissionRequest

        settings = installed(tmp_path, "--server", server.url, "--gate", "permission-request")
        assert "PreToolUse" not in settings["hooks"] and "PermissionRequest" in settings["hooks"]
        # `ls` is read-only (Claude Code runs it without asking); `touch` it prompts for.
        look = ScriptedToolUse("Bash", {"command": "ls", "description": "Look around"})
        call = ScriptedToolUse("Bash", {"command": f"touch {project}/marker", "description": "Create the marker"})
        approver = allow_when_pending(alice)
        with fake_anthropic(call, prelude=look) as fake:
            run = run_claude(fake, tmp_path / "home", project, settings, token=ci_bot.token)
        approver.join(timeout=5)
        assert run.returncode == 0, run.stderr
        assert (project / "marker").exists(), fake.tool_result_text()
        [request] = PermissionRequest.objects.all()
        assert request.tool_input["command"].startswith("touch ")
        [row] = Decision.objects.all()
        assert row.decided_by == "alice"
