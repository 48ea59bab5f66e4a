"""What "Allow for session" / "Always allow" saves: the call's grant, never a whole tool."""

from __future__ import annotations

from typing import Any

import pytest

from approvals import selectors, services
from approvals.models import Rule

DECIDE = "/api/v1/permission-requests/{}/decision"


@pytest.mark.django_db
class GrantSavedTests:
    @pytest.mark.parametrize(
        ("tool_input", "saved"),
        [
            ({"command": "npm run build"}, "Bash(npm run build:*)"),
            ({"command": "ls -la src"}, "Bash(ls -la src)"),
            ({"command": "python -c 'import os'"}, "Bash(python -c 'import os')"),
        ],
    )
    @pytest.mark.parametrize("remember", ["session", "project", "always"])
    def test_it_saves_the_grant_the_card_showed(
        self, api_as: Any, alice: Any, pending: Any, tool_input: dict[str, Any], saved: str, remember: str
    ) -> None:
        request = pending(tool_input=tool_input, session_id="s1")
        assert selectors.grant_rule_for(request) == saved
        response = api_as(alice).post(DECIDE.format(request.pk), {"behavior": "allow", "remember": remember})
        assert response.status_code == 200, response.content
        assert list(Rule.objects.values_list("rule", flat=True)) == [saved]

    @pytest.mark.parametrize("command", ["make *.py", "printf a\\*b", "rm -rf build", "x" * 400])
    def test_it_refuses_to_remember_a_call_no_exact_rule_can_say(self, alice: Any, pending: Any, command: str) -> None:
        request = pending(tool_input={"command": command})
        assert selectors.grant_rule_for(request) is None
        with pytest.raises(services.ServiceError, match="only be allowed once"):
            services.request_decide(
                request.pk, services.Answer(behavior="allow", surface="api", user=alice, remember="always")
            )
        request.refresh_from_db()
        assert request.state == "pending" and not Rule.objects.exists()

    def test_a_tool_with_no_narrow_rule_is_allowed_once_only(self, alice: Any, pending: Any) -> None:
        request = pending(tool_name="WebSearch", tool_input={"query": "gatehouse"})
        assert selectors.grant_rule_for(request) is None
