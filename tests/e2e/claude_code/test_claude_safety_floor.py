"""The real Claude Code CLI 2.1.332: its safety floor is never answered by a Gatehouse allow.

Claude Code prompts before `rm` of a critical path or a write into `.git/`, even after a
PreToolUse allow, and asks its PermissionRequest hook. A fake `rm` first on PATH records
its arguments instead of deleting anything, so the critical-path cases are harmless.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.claude_code.cli import claude_bin, hook_command, hook_settings, run_claude
from tests.e2e.claude_code.hookrun import pending_request, wait_until
from tests.fakes.anthropic_stream import FakeAnthropic, ScriptedToolUse, fake_anthropic
from tests.live import LiveServer, live_server

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
def fake_rm(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose `rm` only writes down what it was asked to remove."""
    bin_dir, ran = tmp_path / "fakebin", tmp_path / "rm-ran"
    bin_dir.mkdir()
    script = bin_dir / "rm"
    script.write_text(f'#!/bin/sh\necho "$@" >> {ran}\n')
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}, ran


def allow_rule(team: Any, text: str) -> None:
    from approvals import services

    services.rule_create(rule=text, behavior="allow", source="projectSettings", team=team)


def run(fake: FakeAnthropic, server: LiveServer, tmp_path: Path, token: str, env: dict[str, str], *args: str) -> Any:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    settings = hook_settings(hook_command(server.url, "--timeout", "4"), timeout=30)
    return run_claude(fake, tmp_path / "home", project, settings, token=token, env=env, args=args)


class ClaudeSafetyFloorTests:
    @pytest.mark.parametrize(
        ("command", "allow", "mode"),
        [
            ("rm -rf ~", "Bash(rm:*)", "default"),
            ("rm -rf /", "Bash(rm:*)", "default"),
            ("rm -rf ~", "Bash(rm:*)", "acceptEdits"),
        ],
    )
    def test_a_rules_allow_never_answers_claude_codes_own_prompt(
        self,
        server: LiveServer,
        tmp_path: Path,
        ci_bot: Any,
        default_team: Any,
        fake_rm: tuple[dict[str, str], Path],
        command: str,
        allow: str,
        mode: str,
    ) -> None:
        from approvals.models import Decision

        env, ran = fake_rm
        allow_rule(default_team, allow)
        with fake_anthropic(ScriptedToolUse("Bash", {"command": command, "description": "clean"})) as fake:
            result = run(fake, server, tmp_path, ci_bot.token, env, "--permission-mode", mode)
        assert result.returncode == 0, result.stderr
        assert not ran.exists(), f"the fake rm ran: {ran.read_text()}"
        rows = list(Decision.objects.order_by("id").values_list("behavior", "reason_type"))
        # The PreToolUse allow by the rule, then the floor's own ask, denied at its deadline.
        assert rows[-1] == ("deny", "timeout"), rows
        assert rows == [("allow", "rule"), ("deny", "timeout")] or rows == [("deny", "timeout")], rows

    def test_a_write_into_git_hooks_is_not_answered_by_an_echo_rule(
        self, server: LiveServer, tmp_path: Path, ci_bot: Any, default_team: Any
    ) -> None:
        from approvals.models import Decision

        hooks = tmp_path / "project" / ".git" / "hooks"
        hooks.mkdir(parents=True)
        allow_rule(default_team, "Bash(echo:*)")
        command = "echo pwned > .git/hooks/pre-commit"
        with fake_anthropic(ScriptedToolUse("Bash", {"command": command, "description": "hook"})) as fake:
            result = run(fake, server, tmp_path, ci_bot.token, {})
        assert result.returncode == 0, result.stderr
        assert not (hooks / "pre-commit").exists(), fake.tool_result_text()
        last = Decision.objects.order_by("id").last()
        assert last is not None and last.reason_type == "timeout"

    def test_a_person_answers_claude_codes_own_prompt(
        self,
        server: LiveServer,
        tmp_path: Path,
        ci_bot: Any,
        default_team: Any,
        alice: Any,
        fake_rm: tuple[dict[str, str], Path],
    ) -> None:
        import threading

        from approvals import services
        from approvals.models import Decision

        env, ran = fake_rm
        allow_rule(default_team, "Bash(rm:*)")

        done = threading.Event()

        def approve() -> None:
            # Every ask a person sees is approved (Gatehouse may ask at PreToolUse too).
            while not done.is_set():
                request = wait_until(lambda: pending_request() or done.is_set(), timeout=60, what="an ask")
                if request is not True:
                    services.request_decide(request.pk, services.Answer(behavior="allow", surface="api", user=alice))

        threading.Thread(target=approve, daemon=True).start()
        with fake_anthropic(ScriptedToolUse("Bash", {"command": "rm -rf ~", "description": "clean"})) as fake:
            result = run(fake, server, tmp_path, ci_bot.token, env)
        done.set()
        assert result.returncode == 0, result.stderr
        assert ran.exists() and "-rf" in ran.read_text(), fake.tool_result_text()
        rows = list(Decision.objects.order_by("id").values_list("reason_type", "decided_by"))
        assert rows[-1] == ("user", "alice"), rows
        assert all(kind == "user" for kind, _ in rows[1:]), rows
