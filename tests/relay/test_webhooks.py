"""Outbound webhooks: signed, timed out, fail open or closed as configured, and racing."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import services
from approvals.models import PermissionRequest
from relay.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify_signature, webhook_create
from tests.relay.fake_webhook import fake_webhook
from tests.relay.wsclient import ask_call

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "webhook-secret-0123456789"


def _pre_tool_use(decision: str, reason: str = "") -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


def _wait_for_state(request: PermissionRequest, timeout: float = 10.0) -> PermissionRequest:
    deadline = time.monotonic() + timeout
    while True:
        request.refresh_from_db()
        if request.state != "pending" or time.monotonic() > deadline:
            return request
        time.sleep(0.02)


class PreToolUseWebhookTests:
    def test_it_posts_the_signed_hook_json_and_a_deny_ends_it(self, ci_bot: Any, default_team: Any) -> None:
        with fake_webhook(lambda body: (200, _pre_tool_use("deny", "no deletes on Fridays"), 0)) as hook:
            webhook_create(team=default_team, name="guard", url=hook.url, event="PreToolUse", secret=SECRET)
            result = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="toolu_1"))
        assert result.decision is not None
        assert result.decision.behavior == "deny"
        assert result.decision.reason_type == "hook"
        assert "no deletes on Fridays" in result.decision.message
        call = hook.calls[0]
        assert call["body"]["hook_event_name"] == "PreToolUse"
        assert call["body"]["tool_name"] == "Bash"
        assert call["body"]["tool_input"] == {"command": "rm -rf build"}
        headers = call["headers"]
        assert verify_signature(SECRET, headers[TIMESTAMP_HEADER], call["raw"], headers[SIGNATURE_HEADER])
        assert not verify_signature(
            "wrong-secret-000000", call["headers"][TIMESTAMP_HEADER], call["raw"], call["headers"][SIGNATURE_HEADER]
        )

    def test_a_hook_allow_still_loses_to_a_deny_rule(self, ci_bot: Any, default_team: Any) -> None:
        services.rule_create(rule="Bash(rm:*)", behavior="deny", source="policySettings", team=default_team)
        with fake_webhook(lambda body: (200, _pre_tool_use("allow"), 0)) as hook:
            webhook_create(team=default_team, name="yes-man", url=hook.url, event="PreToolUse", secret=SECRET)
            result = services.request_submit(agent=ci_bot.agent, call=ask_call())
        assert result.decision is not None and result.decision.behavior == "deny"
        assert result.decision.reason_type == "rule"

    @pytest.mark.parametrize(("on_error", "expected"), [("deny", "deny"), ("ignore", None)])
    def test_a_timed_out_hook_follows_on_error(
        self, ci_bot: Any, default_team: Any, on_error: str, expected: str | None
    ) -> None:
        with fake_webhook(lambda body: (200, _pre_tool_use("allow"), 2.0)) as hook:
            webhook_create(
                team=default_team,
                name="slow",
                url=hook.url,
                event="PreToolUse",
                secret=SECRET,
                timeout_ms=200,
                on_error=on_error,
            )
            started = time.monotonic()
            result = services.request_submit(agent=ci_bot.agent, call=ask_call())
            elapsed = time.monotonic() - started
        assert elapsed < 1.5, "the per-hook timeout was not applied"
        if expected is None:
            assert result.decision is None and result.request.state == "pending"
        else:
            assert result.decision is not None and result.decision.behavior == expected
            assert "webhook slow failed" in result.decision.message

    def test_an_unreachable_hook_set_to_deny_fails_closed(self, ci_bot: Any, default_team: Any) -> None:
        from tests.live import free_port

        webhook_create(
            team=default_team,
            name="down",
            url=f"http://127.0.0.1:{free_port()}/hook",
            event="PreToolUse",
            secret=SECRET,
            on_error="deny",
        )
        result = services.request_submit(agent=ci_bot.agent, call=ask_call())
        assert result.decision is not None and result.decision.behavior == "deny"

    def test_it_reads_which_hooks_apply_on_the_callers_own_connection(self, ci_bot: Any, default_team: Any) -> None:
        # With a connection pool, a worker thread reading the database would hold a
        # second connection per request: at 64 agents the pool deadlocked.
        with fake_webhook(lambda body: (200, _pre_tool_use("deny", "read on the caller's thread"), 0)) as hook:
            webhook_create(team=default_team, name="guard", url=hook.url, event="PreToolUse", secret=SECRET)
            with CaptureQueriesContext(connection) as captured:
                result = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="toolu_own"))
        assert [q for q in captured.captured_queries if 'from "relay_webhook"' in q["sql"].lower()]
        assert result.decision is not None and result.decision.behavior == "deny"
        assert len(hook.calls) == 1

    def test_it_refuses_a_webhook_with_bad_settings(self, default_team: Any) -> None:
        with pytest.raises(ValueError, match="on_error"):
            webhook_create(
                team=default_team,
                name="x",
                url="http://127.0.0.1/",
                event="PreToolUse",
                secret=SECRET,
                on_error="maybe",
            )
        with pytest.raises(ValueError, match="secret"):
            webhook_create(team=default_team, name="x", url="http://127.0.0.1/", event="PreToolUse", secret="short")


class PermissionRequestWebhookTests:
    def test_it_races_for_an_ask_and_its_allow_wins(self, ci_bot: Any, default_team: Any) -> None:
        allow = {"behavior": "allow", "updatedInput": {"command": "rm -rf build/"}}
        answer = {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": allow}}
        with fake_webhook(lambda body: (200, answer, 0)) as hook:
            webhook_create(
                team=default_team, name="approver-bot", url=hook.url, event="PermissionRequest", secret=SECRET
            )
            request = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
            request = _wait_for_state(request)
        assert request.state == "decided"
        decision = request.decision
        assert decision is not None and decision.behavior == "allow"
        assert decision.decided_by == "webhook approver-bot" and decision.surface == "webhook"
        assert decision.reason_type == "hook"
        assert decision.updated_input == {"command": "rm -rf build/"}
        assert hook.calls[0]["body"]["hook_event_name"] == "PermissionRequest"
        assert "tool_use_id" not in hook.calls[0]["body"]

    @pytest.mark.parametrize("extra", [0, 1, 50_000])
    def test_a_deny_counts_however_long_its_message(self, ci_bot: Any, default_team: Any, extra: int) -> None:
        """A message past the answer limit is cut, never a reason to drop the hook's deny."""
        message = "n" * (services.MAX_ANSWER_MESSAGE_CHARS + extra)
        deny = {"behavior": "deny", "message": message}
        answer = {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": deny}}
        with fake_webhook(lambda body: (200, answer, 0)) as hook:
            webhook_create(team=default_team, name="strict-bot", url=hook.url, event="PermissionRequest", secret=SECRET)
            request = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
            request = _wait_for_state(request)
        decision = request.decision
        assert request.state == "decided" and decision is not None and decision.behavior == "deny"
        assert decision.message == "n" * services.MAX_ANSWER_MESSAGE_CHARS

    def test_a_hook_with_no_opinion_leaves_the_ask_to_people(self, ci_bot: Any, default_team: Any) -> None:
        with fake_webhook(lambda body: (200, None, 0)) as hook:
            webhook_create(team=default_team, name="watcher", url=hook.url, event="PermissionRequest", secret=SECRET)
            request = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
            assert hook.called.wait(10)
        # The hook answered with nothing; give the racer a moment to have (not) decided.
        request = _wait_for_state(request, timeout=0.5)
        assert request.state == "pending"

    def test_headless_calls_are_decided_by_permission_request_hooks(self, ci_bot: Any, default_team: Any) -> None:
        answer = {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
        with fake_webhook(lambda body: (200, answer, 0)) as hook:
            webhook_create(team=default_team, name="ci-policy", url=hook.url, event="PermissionRequest", secret=SECRET)
            result = services.request_submit(agent=ci_bot.agent, call=ask_call(context="headless"))
        assert result.decision is not None and result.decision.behavior == "allow"
        assert result.decision.reason_type == "hook"
