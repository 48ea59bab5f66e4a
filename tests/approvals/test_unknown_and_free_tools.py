"""Tools through the real submit API: one Claude Code runs unasked, one no registry entry knows.

A tool Claude Code 2.1.332 runs without asking is allowed at once, and still leaves its
audit row. A tool Gatehouse does not know (a newer CLI's) is a person's to decide, unless
the team's `unknown_tools` setting makes it a deny.
"""

from __future__ import annotations

from typing import Any

import pytest

from approvals import selectors, services
from approvals.models import Decision, PermissionRequest
from tests.approvals.conftest import Api, person_api

URL = "/api/v1/permission-requests"
SETTINGS_URL = "/api/v1/teams/default/settings"
UNKNOWN = {"tool_name": "TeleportFiles", "tool_input": {"where": "mars"}, "session_id": "s1", "cwd": "/tmp/proj"}


@pytest.mark.django_db
class PermissionFreeToolTests:
    def test_it_allows_it_at_once_with_its_audit_row(self, ci_bot: Any) -> None:
        call = {"tool_name": "TaskCreate", "tool_input": {"subject": "s", "description": "d"}, "tool_use_id": "t1"}
        response = Api(ci_bot.auth).post(URL, call)
        assert response.status_code == 200, response.content
        decision = response.json()["decision"]
        assert decision["behavior"] == "allow"
        assert decision["reason"] == {"type": "other", "detail": "no permission needed"}
        row = Decision.objects.get(request__tool_use_id="t1")
        assert (row.behavior, row.tool_name, row.reason_type) == ("allow", "TaskCreate", "other")

    def test_a_deny_rule_still_denies_it(self, ci_bot: Any, default_team: Any) -> None:
        services.rule_create(rule="CronCreate", behavior="deny", source="policySettings", team=default_team)
        call = {"tool_name": "CronCreate", "tool_input": {"cron": "* * * * *", "prompt": "p"}}
        decision = Api(ci_bot.auth).post(URL, call).json()["decision"]
        assert (decision["behavior"], decision["reason"]["rule"]) == ("deny", "CronCreate")


@pytest.mark.django_db
class UnknownToolTests:
    def test_it_waits_for_a_person(self, ci_bot: Any) -> None:
        response = Api(ci_bot.auth).post(URL, UNKNOWN)
        assert response.status_code == 202, response.content
        request = PermissionRequest.objects.get(pk=response.json()["id"])
        assert (request.state, request.tool_name) == ("pending", "TeleportFiles")
        assert request.evaluation["reason"] == {"type": "other", "detail": "unknown tool: a person decides"}
        assert request.evaluation["reserved"] is True

    def test_a_person_allows_it_and_the_audit_row_says_who(self, ci_bot: Any, alice: Any) -> None:
        request_id = Api(ci_bot.auth).post(URL, UNKNOWN).json()["id"]
        services.request_decide(request_id, services.Answer(behavior="allow", surface="api", user=alice))
        row = Decision.objects.get(request_id=request_id)
        assert (row.behavior, row.reason_type, row.decided_by) == ("allow", "user", "alice")

    def test_a_team_admin_makes_unknown_tools_a_deny(self, ci_bot: Any, carol: Any, alice: Any) -> None:
        assert person_api(alice).get(SETTINGS_URL).json()["unknown_tools"] == "ask"
        assert person_api(alice).call("patch", SETTINGS_URL, {"unknown_tools": "deny"}).status_code == 403
        changed = person_api(carol).call("patch", SETTINGS_URL, {"unknown_tools": "deny"})
        assert (changed.status_code, changed.json()["unknown_tools"]) == (200, "deny")
        bad = person_api(carol).call("patch", SETTINGS_URL, {"unknown_tools": "allow"})
        assert bad.status_code == 400
        response = Api(ci_bot.auth).post(URL, {**UNKNOWN, "tool_use_id": "t-deny"})
        assert response.status_code == 200, response.content
        assert response.json()["decision"]["reason"] == {
            "type": "other",
            "detail": "unknown tool: the team denies unknown tools",
        }
        assert Decision.objects.get(request__tool_use_id="t-deny").behavior == "deny"

    def test_explain_answers_as_submit_does(self, ci_bot: Any, carol: Any, default_team: Any) -> None:
        services.team_settings_update(team=default_team, unknown_tools="deny")
        body = {"tool_name": "TeleportFiles", "tool_input": {}}
        explained = person_api(carol).post("/api/v1/rules/explain", body).json()
        submitted = Api(ci_bot.auth).post(URL, body).json()["decision"]
        assert explained["behavior"] == submitted["behavior"] == "deny"

    def test_the_settings_page_sets_it(self, client: Any, carol: Any, default_team: Any) -> None:
        client.force_login(carol)
        page = client.get("/teams/default/settings/").content.decode()
        assert 'name="unknown_tools"' in page
        form = {"approvals_required": "1", "destructive_approvals": "0", "protected_path_approvals": "0"}
        form |= {"on_call_group": "on_call", "unknown_tools": "deny"}
        assert client.post("/teams/default/settings/", form).status_code == 302
        assert selectors.team_settings(default_team.pk).unknown_tools == "deny"
