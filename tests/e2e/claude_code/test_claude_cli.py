"""The real Claude Code CLI, headless, gated by Gatehouse through its hooks.

Claude Code talks to a fake Anthropic API on 127.0.0.1 that asks for one Bash call
(`touch <project>/marker`) and ends the turn once it gets the tool_result; the marker
file is the side effect, and the captured tool_result is what the model saw.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.claude_code.cli import claude_bin, curl_command, hook_command, hook_settings, run_claude
from tests.e2e.claude_code.hookrun import pending_request, wait_until
from tests.fakes.anthropic_stream import FakeAnthropic, ScriptedToolUse, fake_anthropic
from tests.live import LiveServer, free_port, live_server

pytestmark = [
    pytest.mark.claude_cli,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(autouse=True, scope="module")
def _claude_installed() -> None:
    if not os.path.exists(claude_bin()):
        pytest.fail(f"the Claude Code CLI is missing at {claude_bin()}: `make test` installs it")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def fake(project: Path) -> Iterator[FakeAnthropic]:
    call = ScriptedToolUse("Bash", {"command": f"touch {project}/marker", "description": "Create the marker"})
    with fake_anthropic(call) as server:
        yield server


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    with django_db_blocker.unblock(), live_server() as srv:
        yield srv


def rule(team: Any, text: str, behavior: str) -> None:
    from approvals import services

    services.rule_create(rule=text, behavior=behavior, source="projectSettings", team=team)


def decisions() -> list[Any]:
    from approvals.models import Decision

    return list(Decision.objects.select_related("request").order_by("id"))


def decide_when_pending(behavior: str, user: Any, message: str = "") -> threading.Thread:
    """Answer the first pending request as a person would, from another thread."""
    from approvals import services

    def answer() -> None:
        request = wait_until(pending_request, timeout=60, what="a pending request")
        services.request_decide(
            request.pk, services.Answer(behavior=behavior, surface="api", user=user, message=message)
        )

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return thread


class ClaudeDenyRuleTests:
    def test_it_blocks_the_tool_and_the_model_sees_the_reason(
        self, fake: FakeAnthropic, server: LiveServer, project: Path, tmp_path: Path, ci_bot: Any, default_team: Any
    ) -> None:
        rule(default_team, "Bash(touch:*)", "deny")
        run = run_claude(fake, tmp_path / "home", project, hook_settings(hook_command(server.url)), token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        assert not (project / "marker").exists()
        assert fake.tool_result_is_error()
        assert "Bash(touch:*)" in fake.tool_result_text()
        [row] = decisions()
        assert row.behavior == "deny" and row.rule == "Bash(touch:*)"


class ClaudeAskTests:
    def test_an_ask_approved_through_the_api_lets_it_run(
        self, fake: FakeAnthropic, server: LiveServer, project: Path, tmp_path: Path, ci_bot: Any, alice: Any
    ) -> None:
        approver = decide_when_pending("allow", alice)
        run = run_claude(fake, tmp_path / "home", project, hook_settings(hook_command(server.url)), token=ci_bot.token)
        approver.join(timeout=5)
        assert run.returncode == 0, run.stderr
        assert (project / "marker").exists()
        assert not fake.tool_result_is_error(), fake.tool_result_text()
        [row] = decisions()
        assert row.behavior == "allow" and row.decided_by == "alice"

    def test_an_ask_denied_by_a_person_returns_their_message(
        self, fake: FakeAnthropic, server: LiveServer, project: Path, tmp_path: Path, ci_bot: Any, alice: Any
    ) -> None:
        decide_when_pending("deny", alice, "Not in this repo, use the scratch dir.")
        run = run_claude(fake, tmp_path / "home", project, hook_settings(hook_command(server.url)), token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        assert not (project / "marker").exists()
        assert "Not in this repo, use the scratch dir." in fake.tool_result_text()

    def test_a_timeout_applies_on_timeout(
        self, fake: FakeAnthropic, server: LiveServer, project: Path, tmp_path: Path, ci_bot: Any
    ) -> None:
        command = hook_command(server.url, "--timeout", "5", "--on-timeout", "deny")
        run = run_claude(fake, tmp_path / "home", project, hook_settings(command, timeout=30), token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        assert not (project / "marker").exists()
        assert "Nobody approved this call before its deadline" in fake.tool_result_text()
        [row] = decisions()
        assert row.reason_type == "timeout"


class ClaudeUnreachableTests:
    def test_server_down_by_default_leaves_it_to_claude_code(
        self, fake: FakeAnthropic, project: Path, tmp_path: Path, ci_bot: Any
    ) -> None:
        down = f"http://127.0.0.1:{free_port()}"
        run = run_claude(fake, tmp_path / "home", project, hook_settings(hook_command(down)), token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        # The hook answers "ask" (never silence); headless Claude Code refuses what it
        # would have prompted for.
        assert not (project / "marker").exists()
        assert fake.tool_result_is_error(), fake.tool_result_text()

    def test_server_down_with_on_unreachable_allow_lets_it_run(
        self, fake: FakeAnthropic, project: Path, tmp_path: Path, ci_bot: Any
    ) -> None:
        down = f"http://127.0.0.1:{free_port()}"
        command = hook_command(down, "--on-unreachable", "allow")
        run = run_claude(fake, tmp_path / "home", project, hook_settings(command), token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        assert (project / "marker").exists()


class ClaudePermissionRequestTests:
    def test_the_permission_request_hook_alone_gets_a_remote_answer(
        self, fake: FakeAnthropic, server: LiveServer, project: Path, tmp_path: Path, ci_bot: Any, alice: Any
    ) -> None:
        from approvals.models import PermissionRequest

        decide_when_pending("allow", alice)
        settings = hook_settings(hook_command(server.url), events=("PermissionRequest",))
        run = run_claude(fake, tmp_path / "home", project, settings, token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        assert (project / "marker").exists()
        [request] = PermissionRequest.objects.all()
        assert request.permission_suggestions, "Claude Code's suggestions are kept for the approver"

    def test_claude_codes_own_ask_rule_after_an_allow_is_a_new_ask_for_a_person(
        self,
        fake: FakeAnthropic,
        server: LiveServer,
        project: Path,
        tmp_path: Path,
        ci_bot: Any,
        alice: Any,
        default_team: Any,
    ) -> None:
        """A hook allow does not beat Claude Code's own ask rule: it prompts, and that
        prompt is a person's to answer, never the rule that allowed the PreToolUse."""
        rule(default_team, "Bash(touch:*)", "allow")
        decide_when_pending("allow", alice)
        settings = {**hook_settings(hook_command(server.url)), "permissions": {"ask": ["Bash(touch:*)"]}}
        run = run_claude(fake, tmp_path / "home", project, settings, token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        # Headless, Claude Code refuses an ask nobody answers: the marker proves the
        # PermissionRequest hook answered with Alice's allow.
        assert (project / "marker").exists(), fake.tool_result_text()
        rows = [(row.reason_type, row.decided_by) for row in decisions()]
        assert rows == [("rule", "rule Bash(touch:*)"), ("user", "alice")]

    def test_ask_locally_in_headless_mode_is_refused_by_claude_code(
        self, fake: FakeAnthropic, server: LiveServer, project: Path, tmp_path: Path, ci_bot: Any
    ) -> None:
        """--ask-locally hands the prompt to Claude Code; headless, nobody is there to answer."""
        settings = hook_settings(hook_command(server.url, "--ask-locally"))
        run = run_claude(fake, tmp_path / "home", project, settings, token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        assert not (project / "marker").exists()
        assert "Gatehouse asks" in fake.tool_result_text()


class ClaudeCurlHookTests:
    def test_curl_alone_is_the_hook(
        self, fake: FakeAnthropic, server: LiveServer, project: Path, tmp_path: Path, ci_bot: Any, default_team: Any
    ) -> None:
        rule(default_team, "Bash(touch:*)", "deny")
        settings = hook_settings(curl_command(server.url), events=("PreToolUse",))
        run = run_claude(fake, tmp_path / "home", project, settings, token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        assert not (project / "marker").exists()
        assert "Bash(touch:*)" in fake.tool_result_text()

    def test_curl_waits_for_a_person(
        self, fake: FakeAnthropic, server: LiveServer, project: Path, tmp_path: Path, ci_bot: Any, alice: Any
    ) -> None:
        decide_when_pending("allow", alice)
        settings = hook_settings(curl_command(server.url), events=("PreToolUse", "PostToolUse"))
        run = run_claude(fake, tmp_path / "home", project, settings, token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        assert (project / "marker").exists()


class ClaudeOneRowTests:
    def test_one_tool_call_is_one_request_and_one_audit_row(
        self, fake: FakeAnthropic, server: LiveServer, project: Path, tmp_path: Path, ci_bot: Any, alice: Any
    ) -> None:
        from approvals.models import PermissionRequest

        decide_when_pending("allow", alice)
        run = run_claude(fake, tmp_path / "home", project, hook_settings(hook_command(server.url)), token=ci_bot.token)
        assert run.returncode == 0, run.stderr
        assert (project / "marker").exists()
        [request] = PermissionRequest.objects.all()
        [row] = decisions()
        assert row.request_id == request.pk
        assert request.tool_use_id == fake.tool_use.id
        assert request.session_id and request.transcript_path and request.cwd == str(project)
        # PostToolUse was recorded against the same request.
        request.refresh_from_db()
        assert request.result is not None and request.result["ok"] is True
