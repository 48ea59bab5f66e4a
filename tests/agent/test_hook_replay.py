"""A replayed `tool_use_id` gets the earlier answer only if it is the same call, soon.

Same agent, session, `tool_use_id`, tool and input hash, within the replay window:
the same request. Anything else: a 409, never the earlier allow. And every answer
carries `Gatehouse-Answer-For`, the SHA-256 of the exact body it answers.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from tests.e2e.claude_code.hookrun import hook_input

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/hooks/claude-code"


def post(client: Client, body: dict[str, Any], auth: dict[str, Any], query: str = "?wait=0") -> Any:
    return client.post(URL + query, data=json.dumps(body), content_type="application/json", **auth)


@pytest.fixture
def allowed(client: Client, ci_bot: Any, default_team: Any) -> dict[str, Any]:
    from approvals import services

    services.rule_create(rule="Bash(ls:*)", behavior="allow", source="projectSettings", team=default_team)
    body = hook_input("PreToolUse", "ls -la")
    assert post(client, body, ci_bot.auth).json()["hookSpecificOutput"]["permissionDecision"] == "allow"
    return body


def changed(body: dict[str, Any], change: str) -> dict[str, Any]:
    variants = {
        "command": {**body, "tool_input": {**body["tool_input"], "command": "rm -rf ~"}},
        "extra input key": {**body, "tool_input": {**body["tool_input"], "run_in_background": True}},
        "tool": {**body, "tool_name": "Write", "tool_input": {"file_path": "/tmp/proj/x", "content": "x"}},
        "tool same input": {**body, "tool_name": "PowerShell"},
        "session": {**body, "session_id": "another-session"},
        "empty session": {**body, "session_id": ""},
    }
    return variants[change]


class HookReplayTests:
    def test_the_same_call_again_gets_the_same_answer(self, client: Client, ci_bot: Any, allowed: Any) -> None:
        answer = post(client, allowed, ci_bot.auth).json()
        assert answer["hookSpecificOutput"]["permissionDecision"] == "allow"

    @pytest.mark.parametrize(
        "change", ["command", "extra input key", "tool", "tool same input", "session", "empty session"]
    )
    def test_another_call_under_the_same_id_is_a_409(
        self, client: Client, ci_bot: Any, allowed: Any, change: str
    ) -> None:
        response = post(client, changed(allowed, change), ci_bot.auth)
        assert response.status_code == 409, response.content
        assert response.json()["error"]["code"] == "tool_use_id_reused"

    def test_a_replay_after_the_window_is_a_409(self, client: Client, ci_bot: Any, allowed: Any) -> None:
        from approvals.models import PermissionRequest

        decided_at = PermissionRequest.objects.get(tool_use_id=allowed["tool_use_id"]).decided_at
        assert decided_at is not None
        late = decided_at - timedelta(minutes=11)
        PermissionRequest.objects.filter(tool_use_id=allowed["tool_use_id"]).update(decided_at=late)
        assert post(client, allowed, ci_bot.auth).status_code == 409

    def test_another_agent_reusing_the_id_gets_its_own_request(
        self, client: Client, ci_bot: Any, other_bot: Any, allowed: Any
    ) -> None:
        response = post(client, allowed, other_bot.auth)
        assert response.status_code == 202  # other_bot's team has no rules: its own ask

    @pytest.mark.parametrize("query", ["?wait=0", "", "?wait=0&on_timeout=deny", "?withdraw=1"])
    def test_every_answer_names_the_body_it_answers(
        self, client: Client, ci_bot: Any, settings: Any, query: str
    ) -> None:
        settings.GATEHOUSE_HOOK_WAIT = 0.01
        body = hook_input("PreToolUse", "make deploy")
        raw = json.dumps(body).encode()
        response = client.post(URL + query, data=raw, content_type="application/json", **ci_bot.auth)
        assert response["Gatehouse-Answer-For"] == "sha256=" + hashlib.sha256(raw).hexdigest()
