"""POST /hooks/claude-code on its own: bad input, auth, and the shapes Claude Code reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import AsyncClient, Client

from tests.e2e.claude_code.hookrun import hook_input

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/hooks/claude-code"


def post(client: Client, body: Any, auth: dict[str, Any], query: str = "") -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(URL + query, data=data, content_type="application/json", **auth)


class HookEndpointInputTests:
    def test_it_needs_an_agent_token(self, client: Client, alice: Any) -> None:
        from approvals import services

        assert post(client, hook_input("PreToolUse"), {}).status_code == 401
        person = {"HTTP_AUTHORIZATION": f"Bearer {services.personal_token_create(user=alice)}"}
        assert post(client, hook_input("PreToolUse"), person).status_code == 403

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            ("{not json", "not valid JSON"),
            ([], "JSON object"),
            ({"tool_name": "Bash"}, "hook_event_name"),
            ({**hook_input("PreToolUse"), "tool_input": "ls"}, "tool_input"),
            ({**hook_input("PreToolUse"), "tool_use_id": ""}, "tool_use_id"),
            ({**hook_input("PreToolUse"), "tool_name": 5}, "tool_name"),
        ],
    )
    def test_it_explains_bad_input(self, client: Client, ci_bot: Any, body: Any, message: str) -> None:
        response = post(client, body, ci_bot.auth)
        assert response.status_code == 400
        assert message in response.json()["error"]["message"]

    def test_it_rejects_bad_options(self, client: Client, ci_bot: Any) -> None:
        for query in ("?wait=abc", "?wait=-1", "?on_timeout=maybe", "?ask=elsewhere", "?context=nope"):
            assert post(client, hook_input("PreToolUse"), ci_bot.auth, query).status_code == 400, query

    def test_it_ignores_events_it_does_not_handle(self, client: Client, ci_bot: Any) -> None:
        response = post(client, {"hook_event_name": "Stop", "session_id": "s"}, ci_bot.auth)
        assert response.status_code == 200 and response.json() == {}


class HookEndpointAnswerTests:
    async def test_it_answers_pending_with_an_id_when_the_wait_is_short(self, ci_bot: Any) -> None:
        client = AsyncClient()
        body = hook_input("PreToolUse")
        response = await client.post(
            URL + "?wait=0",
            data=json.dumps(body),
            content_type="application/json",
            headers={"Authorization": f"Bearer {ci_bot.token}"},
        )
        assert response.status_code == 202
        assert response.json()["gatehouse"]["status"] == "pending"

    def test_a_replayed_pretooluse_is_the_same_request(self, client: Client, ci_bot: Any) -> None:
        from approvals.models import PermissionRequest

        body = hook_input("PreToolUse")
        first = post(client, body, ci_bot.auth, "?wait=0").json()["gatehouse"]["id"]
        second = post(client, body, ci_bot.auth, "?wait=0").json()["gatehouse"]["id"]
        assert first == second and PermissionRequest.objects.count() == 1

    def test_withdraw_cancels_as_answered_locally(self, client: Client, ci_bot: Any) -> None:
        from approvals.models import Decision

        body = hook_input("PermissionRequest")
        post(client, body, ci_bot.auth, "?wait=0")
        assert post(client, body, ci_bot.auth, "?withdraw=1").json() == {}
        row = Decision.objects.get()
        assert row.reason_type == "cancelled" and row.surface == "local"
        # A late re-poll of the withdrawn call gives no decision: Claude Code's own prompt rules.
        assert post(client, body, ci_bot.auth, "?wait=0").json() == {}

    def test_the_default_wait_ends_in_a_timeout_deny(self, client: Client, ci_bot: Any, settings: Any) -> None:
        settings.GATEHOUSE_HOOK_WAIT = 1
        response = post(client, hook_input("PermissionRequest"), ci_bot.auth)
        decision = response.json()["hookSpecificOutput"]["decision"]
        assert decision["behavior"] == "deny" and "deadline" in decision["message"]

    def test_post_tool_use_for_a_pending_request_cancels_it_as_answered_locally(
        self, client: Client, ci_bot: Any
    ) -> None:
        from approvals.models import PermissionRequest

        body = hook_input("PreToolUse")
        post(client, body, ci_bot.auth, "?wait=0")
        failure = {**body, "hook_event_name": "PostToolUseFailure", "error": "exit 1"}
        assert post(client, failure, ci_bot.auth).json() == {}
        request = PermissionRequest.objects.get()
        assert request.state == "cancelled"
        assert request.result == {"ok": False, "error": "exit 1"}


class HookResultTests:
    @pytest.mark.parametrize("outcome", ["deny rule", "expired"])
    def test_a_result_for_a_call_that_never_ran_is_not_recorded(
        self, client: Client, ci_bot: Any, default_team: Any, settings: Any, outcome: str
    ) -> None:
        from approvals import services
        from approvals.models import PermissionRequest

        if outcome == "deny rule":
            services.rule_create(rule="Bash(rm:*)", behavior="deny", source="projectSettings", team=default_team)
        body = hook_input("PreToolUse")
        post(client, body, ci_bot.auth, "?wait=0&on_timeout=deny")
        for event in ("PostToolUse", "PostToolUseFailure"):
            assert post(client, {**body, "hook_event_name": event, "tool_response": "ran"}, ci_bot.auth).json() == {}
        request = PermissionRequest.objects.get()
        assert request.state in ("decided", "expired") and request.result is None and request.result_at is None

    def test_a_result_for_an_allowed_call_is_recorded(self, client: Client, ci_bot: Any, default_team: Any) -> None:
        from approvals import services
        from approvals.models import PermissionRequest

        services.rule_create(rule="Bash(rm:*)", behavior="allow", source="projectSettings", team=default_team)
        body = hook_input("PreToolUse")
        post(client, body, ci_bot.auth)
        post(client, {**body, "hook_event_name": "PostToolUse", "tool_response": "ran"}, ci_bot.auth)
        assert PermissionRequest.objects.get().result == {"ok": True, "output": "ran"}

    def test_an_allowed_calls_result_is_one_statement_after_the_token(
        self, client: Client, ci_bot: Any, default_team: Any
    ) -> None:
        from approvals import services
        from approvals.models import PermissionRequest
        from tests.round_trips import round_trips

        services.rule_create(rule="Bash(rm:*)", behavior="allow", source="projectSettings", team=default_team)
        body = hook_input("PreToolUse")
        post(client, body, ci_bot.auth)
        with round_trips() as trips:
            post(client, {**body, "hook_event_name": "PostToolUseFailure", "error": "exit 2"}, ci_bot.auth)
        statements = [sql for trip in trips for sql in trip]
        # The token's read, then the update that finds the call's request itself.
        assert len(statements) == 2 and statements[1].startswith("UPDATE"), statements
        assert PermissionRequest.objects.get().result == {"ok": False, "error": "exit 2"}


class PermissionRequestGrantTests:
    """What a person's grant on Claude Code's own prompt sends back (`updatedPermissions`)."""

    def _prompt_then_decide(self, client: Client, ci_bot: Any, alice: Any, command: str, **decision: Any) -> Any:
        from approvals import services
        from approvals.models import PermissionRequest

        body = hook_input("PermissionRequest", command)
        post(client, body, ci_bot.auth, "?wait=0")
        request = PermissionRequest.objects.get(state="pending")
        services.request_decide(request.pk, services.Answer(behavior="allow", surface="api", user=alice, **decision))
        return post(client, body, ci_bot.auth, "?wait=0").json()["hookSpecificOutput"]["decision"]

    @pytest.mark.parametrize(
        ("decision", "expected"),
        [
            ({}, None),
            ({"remember": "session"}, "session"),
            ({"remember": "project"}, "localSettings"),
            ({"remember": "always"}, "localSettings"),
            # Claude Code's rules never expire: a grant for some hours stays in its session.
            ({"remember": "always", "remember_hours": 8}, "session"),
            ({"remember": "project", "remember_hours": 1}, "session"),
        ],
    )
    def test_only_the_saved_rule_goes_back_to_claude_code(
        self, client: Client, ci_bot: Any, alice: Any, decision: dict[str, Any], expected: str | None
    ) -> None:
        answer = self._prompt_then_decide(client, ci_bot, alice, "npm run test:unit", **decision)
        assert answer["behavior"] == "allow"
        if expected is None:
            assert "updatedPermissions" not in answer
            return
        [entry] = answer["updatedPermissions"]
        assert entry == {
            "type": "addRules",
            "rules": [{"toolName": "Bash", "ruleContent": "npm run test:unit:*"}],
            "behavior": "allow",
            "destination": expected,
        }

    @pytest.mark.parametrize(
        "suggestions",
        [
            [{"type": "setMode", "mode": "bypassPermissions", "destination": "session"}],
            [{"type": "addDirectories", "directories": ["/"], "destination": "localSettings"}],
            [{"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow", "destination": "userSettings"}],
        ],
    )
    def test_what_the_prompt_suggested_is_never_echoed(
        self, client: Client, ci_bot: Any, alice: Any, suggestions: list[dict[str, Any]]
    ) -> None:
        from approvals import services
        from approvals.models import PermissionRequest

        body = {**hook_input("PermissionRequest", "npm run test:unit"), "permission_suggestions": suggestions}
        post(client, body, ci_bot.auth, "?wait=0")
        request = PermissionRequest.objects.get(state="pending")
        services.request_decide(
            request.pk, services.Answer(behavior="allow", surface="api", user=alice, remember="always")
        )
        answer = post(client, body, ci_bot.auth, "?wait=0").json()["hookSpecificOutput"]["decision"]
        assert [entry["type"] for entry in answer["updatedPermissions"]] == ["addRules"]
        assert answer["updatedPermissions"][0]["rules"] == [{"toolName": "Bash", "ruleContent": "npm run test:unit:*"}]

    def test_an_allow_once_does_not_answer_the_next_identical_prompt_after_the_call_ran(
        self, client: Client, ci_bot: Any, alice: Any
    ) -> None:
        """A PermissionRequest has no `tool_use_id`: the call's PostToolUse (with Claude
        Code's own id) marks it run, so the same command asked again is a new request."""
        from approvals.models import PermissionRequest

        answer = self._prompt_then_decide(client, ci_bot, alice, "rm -rf build")
        assert answer["behavior"] == "allow"
        ran = {**hook_input("PostToolUse", "rm -rf build"), "tool_response": {"stdout": ""}}
        post(client, ran, ci_bot.auth)
        again = post(client, hook_input("PermissionRequest", "rm -rf build"), ci_bot.auth, "?wait=0")
        assert again.status_code == 202
        assert PermissionRequest.objects.filter(state="pending").count() == 1
        assert PermissionRequest.objects.count() == 2
