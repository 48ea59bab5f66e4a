"""A PermissionRequest after Gatehouse allowed the call is Claude Code's safety floor: a person's.

Claude Code 2.1.332 may prompt even after a PreToolUse allow (its own checks). Its
PermissionRequest hook then asks Gatehouse; the answer must come from a person, never
from the earlier allow, a rule, a mode or a classifier (a deny rule may still deny: that
is stricter). The floors Gatehouse knows — an `rm` of a critical path, a write into
`.git/` or `.claude/` — are its own safety check already: PreToolUse asks a person.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from agent.facts import with_facts
from tests.e2e.claude_code.hookrun import hook_input

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/hooks/claude-code"

# Calls Gatehouse allows at PreToolUse: any prompt Claude Code then opens is the floor.
FLOOR_COMMANDS = [
    "rm -rf build",
    "rm -rf /tmp/proj/dist",
]
# Critical-path removals and writes into protected paths (or a glob that could name
# one) are the engine's own safety check: PreToolUse already asks, so no allow exists
# for a prompt to inherit.
RESERVED_AT_PRE_TOOL_USE = [
    "rm -rf ~",
    "rm -rf /",
    "rm -rf $HOME",
    "rm -rf /tmp/proj",
    "rm -rf /*",
    "echo x > .git/hooks/pre-commit",
    "tee .claude/settings.json",
    "cp evil .git/config",
]


def post(client: Client, body: dict[str, Any], auth: dict[str, Any], query: str = "?wait=0") -> Any:
    # What Gatehouse's hook command sends: Claude Code's input plus this machine's facts.
    sent = json.loads(with_facts(json.dumps(body).encode(), body))
    return client.post(URL + query, data=json.dumps(sent), content_type="application/json", **auth)


def prompt_for(pre_tool_use: dict[str, Any]) -> dict[str, Any]:
    """The PermissionRequest Claude Code sends for the same call (no tool_use_id)."""
    body = {k: v for k, v in pre_tool_use.items() if k != "tool_use_id"}
    return {**body, "hook_event_name": "PermissionRequest", "permission_suggestions": []}


def allowed_at_pre_tool_use(client: Client, auth: dict[str, str], command: str, **extra: Any) -> dict[str, Any]:
    body = hook_input("PreToolUse", command, **extra)
    answer = post(client, body, auth).json()
    assert answer["hookSpecificOutput"]["permissionDecision"] == "allow", answer
    return body


def rule(team: Any, text: str, behavior: str) -> None:
    from approvals import services

    services.rule_create(rule=text, behavior=behavior, source="projectSettings", team=team)


class SafetyFloorTests:
    @pytest.mark.parametrize("command", FLOOR_COMMANDS)
    def test_it_never_answers_the_prompt_with_a_rules_allow(
        self, client: Client, ci_bot: Any, default_team: Any, command: str
    ) -> None:
        from approvals.models import PermissionRequest

        rule(default_team, f"Bash({command.split()[0]}:*)", "allow")
        rule(default_team, "Bash(*)", "allow")
        body = allowed_at_pre_tool_use(client, ci_bot.auth, command)
        response = post(client, prompt_for(body), ci_bot.auth)
        assert response.status_code == 202, response.json()
        floor = PermissionRequest.objects.get(pk=response.json()["gatehouse"]["id"])
        assert floor.state == "pending"
        assert floor.evaluation["reason"]["type"] == "safetyCheck"
        assert floor.evaluation["safety_floor"]["follows"] == str(
            PermissionRequest.objects.get(tool_use_id=body["tool_use_id"]).pk
        )

    @pytest.mark.parametrize("command", RESERVED_AT_PRE_TOOL_USE)
    def test_it_asks_a_person_already_at_pre_tool_use_for_protected_writes(
        self, client: Client, ci_bot: Any, default_team: Any, command: str
    ) -> None:
        rule(default_team, f"Bash({command.split()[0]}:*)", "allow")
        rule(default_team, "Bash(*)", "allow")
        from approvals.models import PermissionRequest

        response = post(client, hook_input("PreToolUse", command), ci_bot.auth)
        assert response.status_code == 202, response.json()  # waiting for a person
        asked = PermissionRequest.objects.get(pk=response.json()["gatehouse"]["id"])
        assert asked.state == "pending"
        assert asked.evaluation["reason"]["type"] == "safetyCheck"
        assert asked.evaluation["reserved"] is True

    def test_it_never_answers_the_prompt_with_a_modes_allow(self, client: Client, registered_agent: Any) -> None:
        yolo = registered_agent("yolo", "bypassPermissions")
        body = allowed_at_pre_tool_use(client, yolo.auth, "rm -rf build", permission_mode="bypassPermissions")
        response = post(client, prompt_for(body), yolo.auth)
        assert response.status_code == 202

    def test_it_never_answers_the_prompt_with_a_persons_earlier_allow(
        self, client: Client, ci_bot: Any, alice: Any
    ) -> None:
        from approvals import services
        from approvals.models import PermissionRequest

        body = hook_input("PreToolUse", "rm -rf ~")
        first = post(client, body, ci_bot.auth).json()["gatehouse"]["id"]
        services.request_decide(first, services.Answer(behavior="allow", surface="api", user=alice))
        assert post(client, body, ci_bot.auth).json()["hookSpecificOutput"]["permissionDecision"] == "allow"
        response = post(client, prompt_for(body), ci_bot.auth)
        assert response.status_code == 202
        assert PermissionRequest.objects.filter(state="pending").count() == 1

    def test_it_treats_a_prompt_for_rewritten_input_in_a_gated_session_as_the_floor(
        self, client: Client, ci_bot: Any, default_team: Any
    ) -> None:
        rule(default_team, "Bash(rm:*)", "allow")
        allowed_at_pre_tool_use(client, ci_bot.auth, "rm -rf build")
        other = prompt_for(hook_input("PreToolUse", "rm -rf ~"))
        assert post(client, other, ci_bot.auth).status_code == 202

    def test_a_persons_answer_to_the_prompt_is_what_the_hook_prints(
        self, client: Client, ci_bot: Any, default_team: Any, alice: Any
    ) -> None:
        from approvals import services
        from approvals.models import Decision

        rule(default_team, "Bash", "allow")
        body = allowed_at_pre_tool_use(client, ci_bot.auth, "rm -rf build")
        floor_id = post(client, prompt_for(body), ci_bot.auth).json()["gatehouse"]["id"]
        services.request_decide(floor_id, services.Answer(behavior="allow", surface="api", user=alice))
        # The hook's re-poll finds the person's answer, not a third request.
        answer = post(client, prompt_for(body), ci_bot.auth).json()
        assert answer["hookSpecificOutput"]["decision"]["behavior"] == "allow"
        rows = list(Decision.objects.order_by("id").values_list("reason_type", "decided_by"))
        assert rows == [("rule", "rule Bash"), ("user", "alice")]

    def test_a_deny_rule_still_denies_the_prompt(self, client: Client, ci_bot: Any, default_team: Any) -> None:
        rule(default_team, "Bash", "allow")
        body = allowed_at_pre_tool_use(client, ci_bot.auth, "rm -rf build")
        rule(default_team, "Bash(rm -rf build)", "deny")
        answer = post(client, prompt_for(body), ci_bot.auth).json()
        assert answer["hookSpecificOutput"]["decision"]["behavior"] == "deny"

    def test_the_prompts_deadline_denies(self, client: Client, ci_bot: Any, default_team: Any) -> None:
        rule(default_team, "Bash", "allow")
        body = allowed_at_pre_tool_use(client, ci_bot.auth, "rm -rf build")
        for query in ("?wait=0&on_timeout=deny", "?wait=0&on_timeout=ask"):
            answer = post(client, prompt_for(body), ci_bot.auth, query).json()
            assert answer.get("hookSpecificOutput", {}).get("decision", {}).get("behavior") != "allow", answer

    def test_a_prompt_for_a_pending_call_joins_its_request(self, client: Client, ci_bot: Any, alice: Any) -> None:
        from approvals import services
        from approvals.models import Decision, PermissionRequest

        body = hook_input("PreToolUse", "rm -rf build")
        answer = post(client, body, ci_bot.auth, "?ask=local").json()
        assert answer["hookSpecificOutput"]["permissionDecision"] == "ask"
        pending = post(client, prompt_for(body), ci_bot.auth).json()["gatehouse"]["id"]
        services.request_decide(pending, services.Answer(behavior="allow", surface="api", user=alice))
        answer = post(client, prompt_for(body), ci_bot.auth).json()
        assert answer["hookSpecificOutput"]["decision"]["behavior"] == "allow"
        assert PermissionRequest.objects.count() == 1 and Decision.objects.count() == 1

    def test_without_a_pretooluse_gate_the_prompt_is_decided_as_before(
        self, client: Client, ci_bot: Any, default_team: Any
    ) -> None:
        rule(default_team, "Bash(make:*)", "allow")
        answer = post(client, prompt_for(hook_input("PreToolUse", "make test")), ci_bot.auth).json()
        assert answer["hookSpecificOutput"]["decision"]["behavior"] == "allow"

    def test_without_a_pretooluse_gate_a_re_poll_finds_the_persons_answer(
        self, client: Client, ci_bot: Any, alice: Any
    ) -> None:
        from approvals import services
        from approvals.models import PermissionRequest

        prompt = prompt_for(hook_input("PreToolUse", "rm -rf build"))
        pending = post(client, prompt, ci_bot.auth).json()["gatehouse"]["id"]
        services.request_decide(pending, services.Answer(behavior="allow", surface="api", user=alice))
        answer = post(client, prompt, ci_bot.auth).json()
        assert answer["hookSpecificOutput"]["decision"]["behavior"] == "allow"
        assert PermissionRequest.objects.count() == 1
