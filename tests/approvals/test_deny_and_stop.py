""" "Deny and stop": a deny that also ends the agent's turn (Claude Code's `interrupt`).

What Claude Code does with it is established with the real CLI in
tests/e2e/claude_code/test_claude_hook_contract.py::DenyAndStopTests.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def ask(agent: Any) -> Any:
    from approvals import services

    call = {"tool_name": "Bash", "tool_input": {"command": "npm publish"}, "session_id": "s1"}
    return services.request_submit(agent=agent, call=call).request


class DenyAndStopTests:
    def test_the_api_takes_interrupt_with_a_deny_only(self, client: Any, alice: Any, ci_bot: Any) -> None:
        request = ask(ci_bot.agent)
        client.force_login(alice)
        url = f"/api/v1/permission-requests/{request.pk}/decision"
        bad = client.post(url, {"behavior": "allow", "interrupt": True}, content_type="application/json")
        assert bad.status_code == 400 and "interrupt goes with behavior deny" in bad.content.decode()
        done = client.post(url, {"behavior": "deny", "interrupt": True}, content_type="application/json")
        assert done.status_code == 200, done.content
        assert done.json()["decision"]["reason"]["interrupt"] is True

    def test_the_card_button_stops_and_the_hook_output_says_so(self, client: Any, alice: Any, ci_bot: Any) -> None:
        from approvals import selectors
        from approvals.api.claude_code import Outcome, render

        request = ask(ci_bot.agent)
        client.force_login(alice)
        assert "Deny and stop" in client.get("/").content.decode()
        response = client.post(f"/requests/{request.pk}/decide", {"action": "stop"}, HTTP_ACCEPT="application/json")
        assert response.status_code == 200, response.content
        assert "the agent was stopped" in response.json()["html"]
        request.refresh_from_db()
        outcome = Outcome(request, selectors.decision_for(request))
        assert render("PermissionRequest", outcome)["hookSpecificOutput"]["decision"]["interrupt"] is True
        pre = render("PreToolUse", outcome)
        assert pre["continue"] is False and pre["hookSpecificOutput"]["permissionDecision"] == "deny"

    def test_a_plain_deny_does_not_stop(self, ci_bot: Any, alice: Any) -> None:
        from approvals import selectors, services
        from approvals.api.claude_code import Outcome, render

        request = ask(ci_bot.agent)
        services.request_decide(request.pk, services.Answer(behavior="deny", surface="api", user=alice))
        request.refresh_from_db()
        outcome = Outcome(request, selectors.decision_for(request))
        assert "interrupt" not in render("PermissionRequest", outcome)["hookSpecificOutput"]["decision"]
        assert "continue" not in render("PreToolUse", outcome)
