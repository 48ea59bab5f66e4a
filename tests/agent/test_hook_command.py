"""`python -m agent.hook` against a real Gatehouse server (no Claude Code CLI)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.claude_code.hookrun import ROOT, finish, hook_input, pending_request, run_hook, start_hook, wait_until
from tests.live import LiveServer, free_port, live_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def srv(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    """One server for the module's tests; each test's data is flushed after it."""
    with django_db_blocker.unblock(), live_server() as server:
        yield server


# The hook keeps 2 s of its deadline for the server's last answer (agent.hook.ANSWER_MARGIN):
# with 2 s in all, a loaded machine's first call could use them up, and the hook then
# reported the server unreachable instead of applying --on-timeout.
HOOK_TIMEOUT = "4"


def deny_rule(team: Any, text: str = "Bash(rm:*)") -> None:
    from approvals import services

    services.rule_create(rule=text, behavior="deny", source="projectSettings", team=team)


def decisions() -> list[Any]:
    from approvals.models import Decision

    return list(Decision.objects.order_by("id"))


class HookImportTests:
    def test_it_loads_no_django(self) -> None:
        code = "import agent.hook, sys; assert not any(m.startswith('django') for m in sys.modules), 'django loaded'"
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)

    def test_it_loads_nothing_from_the_server_packages(self) -> None:
        code = (
            "import agent.hook, sys; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('django', 'approvals', 'relay', 'policy', 'rest_framework', 'channels')]; assert not bad, bad"
        )
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)

    def test_it_imports_neither_re_nor_enum_for_a_decision(
        self, srv: LiveServer, ci_bot: Any, default_team: Any
    ) -> None:
        """The Python halves of json, socket and signal import re and enum: a third of the start-up."""
        from approvals import services

        services.rule_create(rule="Bash(ls:*)", behavior="allow", source="userSettings", team=default_team)
        heavy = {
            "re",
            "enum",
            "json",
            "socket",
            "signal",
            "typing",
            "argparse",
            "ssl",
            "http.client",
            "urllib.request",
            "email",
            "encodings.idna",
        }
        floor = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True)
        body = hook_input("PreToolUse", "ls")
        code, out, err = run_hook(srv.url, ci_bot.token, body, PYTHONPROFILEIMPORTTIME="1")
        assert code == 0 and out["hookSpecificOutput"]["permissionDecision"] == "allow", err

        def imported(report: str) -> set[str]:
            return {line.rsplit("|", 1)[1].strip() for line in report.splitlines() if line.startswith("import time:")}

        assert (imported(err) - imported(floor.stderr)) & heavy == set()

    def test_it_starts_quickly(self) -> None:
        """Measure start-up (import + argument parsing + an ignored event); reported, not asserted."""
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "agent.hook"],
                cwd=ROOT,
                input='{"hook_event_name": "Notification"}',
                capture_output=True,
                text=True,
            )
            runs.append((time.perf_counter() - started) * 1000)
            assert done.returncode == 0 and done.stdout == ""
        baseline = []
        for _ in range(5):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            baseline.append((time.perf_counter() - started) * 1000)
        print(f"\nhook start-up: median {sorted(runs)[2]:.0f} ms (bare python: {sorted(baseline)[2]:.0f} ms)")


class HookDecisionTests:
    def test_it_prints_a_deny_from_a_rule_with_its_reason(
        self, srv: LiveServer, ci_bot: Any, default_team: Any
    ) -> None:
        deny_rule(default_team)
        code, out, err = run_hook(srv.url, ci_bot.token, hook_input("PreToolUse", "rm -rf build"))
        assert code == 0, err
        output = out["hookSpecificOutput"]
        assert output["hookEventName"] == "PreToolUse"
        assert output["permissionDecision"] == "deny"
        assert output["permissionDecisionReason"]
        [row] = decisions()
        assert row.behavior == "deny" and row.reason_type == "rule" and row.rule == "Bash(rm:*)"

    def test_it_allows_from_an_allow_rule(self, srv: LiveServer, ci_bot: Any, default_team: Any) -> None:
        from approvals import services

        services.rule_create(rule="Bash(ls:*)", behavior="allow", source="userSettings", team=default_team)
        code, out, err = run_hook(srv.url, ci_bot.token, hook_input("PreToolUse", "ls -la"))
        assert code == 0, err
        assert out["hookSpecificOutput"]["permissionDecision"] == "allow"

    def test_it_waits_for_a_person_who_allows(self, srv: LiveServer, ci_bot: Any, alice: Any) -> None:
        from approvals import services

        body = hook_input("PreToolUse", "rm -rf build")
        process = start_hook(srv.url, ci_bot.token, body, "--poll", "1")
        request = wait_until(lambda: pending_request(body["tool_use_id"]), what="the pending request")
        services.request_decide(request.pk, services.Answer(behavior="allow", surface="api", user=alice))
        code, out, err = finish(process)
        assert code == 0, err
        assert out["hookSpecificOutput"]["permissionDecision"] == "allow"
        assert "alice" in out["hookSpecificOutput"]["permissionDecisionReason"]
        [row] = decisions()
        assert row.decided_by == "alice"

    def test_it_returns_the_persons_message_on_a_deny(self, srv: LiveServer, ci_bot: Any, alice: Any) -> None:
        from approvals import services

        body = hook_input("PreToolUse", "rm -rf build")
        process = start_hook(srv.url, ci_bot.token, body)
        request = wait_until(lambda: pending_request(body["tool_use_id"]), what="the pending request")
        services.request_decide(
            request.pk,
            services.Answer(behavior="deny", surface="api", user=alice, message="Use make clean instead."),
        )
        _code, out, _err = finish(process)
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert out["hookSpecificOutput"]["permissionDecisionReason"] == "Use make clean instead."

    def test_it_applies_on_timeout_deny_and_records_a_timeout(self, srv: LiveServer, ci_bot: Any) -> None:
        code, out, err = run_hook(srv.url, ci_bot.token, hook_input("PreToolUse"), "--timeout", HOOK_TIMEOUT)
        assert code == 0, err
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
        [row] = decisions()
        assert row.behavior == "deny" and row.reason_type == "timeout"
        assert row.request.state == "expired"

    def test_it_refuses_on_timeout_allow(self, srv: LiveServer, ci_bot: Any) -> None:
        """A deadline is the server's to decide: the hook cannot be told to allow on one."""
        args = ("--timeout", "2", "--on-timeout", "allow")
        code, out, err = run_hook(srv.url, ci_bot.token, hook_input("PreToolUse"), *args)
        assert code == 2 and out is None and "--on-timeout" in err
        assert decisions() == []

    def test_it_applies_on_timeout_ask_by_handing_back_to_claude(self, srv: LiveServer, ci_bot: Any) -> None:
        args = ("--timeout", HOOK_TIMEOUT, "--on-timeout", "ask")
        _code, out, _err = run_hook(srv.url, ci_bot.token, hook_input("PreToolUse"), *args)
        assert out["hookSpecificOutput"]["permissionDecision"] == "ask"
        [row] = decisions()
        assert row.request.state == "cancelled"

    def test_it_asks_locally_at_once_when_told(self, srv: LiveServer, ci_bot: Any) -> None:
        _code, out, _err = run_hook(srv.url, ci_bot.token, hook_input("PreToolUse"), "--ask-locally")
        assert out["hookSpecificOutput"]["permissionDecision"] == "ask"
        assert pending_request() is not None


class HookUnreachableTests:
    def test_it_asks_by_default_when_the_server_is_down(self, ci_bot: Any) -> None:
        """Never silence: in bypass or auto mode silence would run the call unreviewed."""
        url = f"http://127.0.0.1:{free_port()}"
        code, out, err = run_hook(url, ci_bot.token, hook_input("PreToolUse"))
        assert code == 0
        assert out["hookSpecificOutput"]["permissionDecision"] == "ask"
        assert "unreachable" in out["hookSpecificOutput"]["permissionDecisionReason"]
        assert err.count("\n") == 1 and "Traceback" not in err
        assert "on-unreachable ask" in err

    def test_it_denies_when_told_to_and_the_server_is_down(self, ci_bot: Any) -> None:
        url = f"http://127.0.0.1:{free_port()}"
        _code, out, _err = run_hook(url, ci_bot.token, hook_input("PermissionRequest"), "--on-unreachable", "deny")
        assert out["hookSpecificOutput"]["decision"]["behavior"] == "deny"
        assert "unreachable" in out["hookSpecificOutput"]["decision"]["message"]

    def test_it_reports_a_bad_token_in_one_line(self, srv: LiveServer, ci_bot: Any) -> None:
        _code, out, err = run_hook(srv.url, "gha_wrong", hook_input("PreToolUse"), "--on-unreachable", "deny")
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert "401" in err and "Traceback" not in err and err.count("\n") == 1

    def test_it_reads_the_token_from_a_file(
        self, srv: LiveServer, ci_bot: Any, default_team: Any, tmp_path: Any
    ) -> None:
        deny_rule(default_team)
        token_file = tmp_path / "token"
        token_file.write_text(ci_bot.token + "\n")
        _code, out, err = run_hook(srv.url, "", hook_input("PreToolUse"), GATEHOUSE_TOKEN_FILE=str(token_file))
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny", err

    def test_it_survives_garbage_on_stdin(self, ci_bot: Any) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "agent.hook", "--server", "http://127.0.0.1:9"],
            cwd=ROOT,
            input="not json",
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0 and done.stdout == ""
        assert "Traceback" not in done.stderr


class HookWithdrawTests:
    @pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
    def test_it_withdraws_its_request_when_killed(self, srv: LiveServer, ci_bot: Any, sig: int) -> None:
        body = hook_input("PermissionRequest")
        process = start_hook(srv.url, ci_bot.token, body)
        request = wait_until(pending_request, what="the pending request")
        process.send_signal(sig)
        finish(process, timeout=10)
        request.refresh_from_db()
        assert request.state == "cancelled"
        [row] = decisions()
        assert row.reason_type == "cancelled" and "answered at the terminal" in row.message
        assert row.surface == "local"
        # Every surface words it from the same sentence.
        assert "(answered at the terminal)" in request.outcome_sentence(row)

    def test_post_tool_use_after_the_terminal_answered_says_the_call_ran(self, srv: LiveServer, ci_bot: Any) -> None:
        """Claude Code's dialog won (the hook got SIGTERM), the tool ran, PostToolUse follows."""
        pre = hook_input("PreToolUse")
        process = start_hook(srv.url, ci_bot.token, pre)
        request = wait_until(pending_request, what="the pending request")
        process.send_signal(signal.SIGTERM)
        finish(process, timeout=10)
        post = {**pre, "hook_event_name": "PostToolUse", "tool_response": {"stdout": "", "exit_code": 0}}
        code, out, _err = run_hook(srv.url, ci_bot.token, post)
        assert code == 0 and out is None
        request.refresh_from_db()
        assert request.state == "cancelled"
        assert request.result == {"ok": True, "output": {"stdout": "", "exit_code": 0}}


class HookEventTests:
    def test_permission_request_joins_the_pretooluse_request(self, srv: LiveServer, ci_bot: Any, alice: Any) -> None:
        from approvals import services
        from approvals.models import PermissionRequest

        pre = hook_input("PreToolUse", "rm -rf build")
        suggestions = [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]
        perm = hook_input("PermissionRequest", "rm -rf build", permission_suggestions=suggestions)
        _, out, _ = run_hook(srv.url, ci_bot.token, pre, "--ask-locally")
        assert out["hookSpecificOutput"]["permissionDecision"] == "ask", out
        process = start_hook(srv.url, ci_bot.token, perm)
        request = wait_until(
            lambda: PermissionRequest.objects.filter(permission_suggestions=suggestions).first(),
            what="suggestions stored",
        )
        services.request_decide(request.pk, services.Answer(behavior="allow", surface="api", user=alice))
        _code, out, _err = finish(process)
        assert out == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
        assert PermissionRequest.objects.count() == 1
        assert len(decisions()) == 1

    def test_post_tool_use_records_the_result(self, srv: LiveServer, ci_bot: Any, default_team: Any) -> None:
        from approvals import services
        from approvals.models import PermissionRequest

        services.rule_create(rule="Bash(ls:*)", behavior="allow", source="userSettings", team=default_team)
        pre = hook_input("PreToolUse", "ls")
        post = {**pre, "hook_event_name": "PostToolUse", "tool_response": {"stdout": "a\nb", "stderr": ""}}
        run_hook(srv.url, ci_bot.token, pre)
        code, out, err = run_hook(srv.url, ci_bot.token, post)
        assert code == 0 and out is None, err
        request = PermissionRequest.objects.get(tool_use_id=pre["tool_use_id"])
        assert request.result == {"ok": True, "output": {"stdout": "a\nb", "stderr": ""}}
