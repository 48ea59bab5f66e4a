"""Rules over HTTP: CRUD for approvers, read for viewers, policySettings for admins, explain."""

from __future__ import annotations

from typing import Any

import pytest

from approvals.models import Decision, PermissionRequest, Rule

URL = "/api/v1/rules"


@pytest.mark.django_db
class RuleCrudTests:
    def test_it_creates_a_rule_in_the_documented_shape(self, api_as: Any, alice: Any) -> None:
        response = api_as(alice).post(
            URL, {"rule": "Bash(git commit:*)", "behavior": "allow", "source": "projectSettings", "note": "ci"}
        )
        assert response.status_code == 201, response.content
        body = response.json()
        assert set(body) >= {
            "id",
            "rule",
            "behavior",
            "source",
            "scope",
            "expires_at",
            "note",
            "created_by",
            "agent",
            "project_path",
            "session_id",
        }
        assert (body["rule"], body["created_by"], body["scope"], body["team"]) == (
            "Bash(git commit:*)",
            "alice",
            "global",
            "default",
        )

    def test_it_returns_the_engines_message_for_an_invalid_rule(self, api_as: Any, alice: Any) -> None:
        response = api_as(alice).post(URL, {"rule": "Bash(", "behavior": "deny"})
        assert response.status_code == 400
        assert "unbalanced parenthesis" in response.json()["error"]["message"]
        assert not Rule.objects.exists()

    def test_it_scopes_a_rule_to_an_agent_by_name(self, api_as: Any, alice: Any, ci_bot: Any) -> None:
        api = api_as(alice)
        response = api.post(URL, {"rule": "Read", "behavior": "allow", "scope": "agent", "agent": "ci-bot"})
        assert response.status_code == 201, response.content
        assert response.json()["agent"] == "ci-bot"
        missing = api.post(URL, {"rule": "Read", "behavior": "allow", "scope": "agent", "agent": "ghost"})
        assert missing.status_code == 400
        unscoped = api.post(URL, {"rule": "Read", "behavior": "allow", "scope": "agent"})
        assert "needs an agent" in unscoped.json()["error"]["message"]

    def test_it_updates_and_deletes(self, api_as: Any, alice: Any) -> None:
        api = api_as(alice)
        rule_id = api.post(URL, {"rule": "Bash(ls)", "behavior": "allow"}).json()["id"]
        patched = api.call("patch", f"{URL}/{rule_id}", {"behavior": "deny", "expires_at": "2999-01-01T00:00:00Z"})
        assert patched.status_code == 200, patched.content
        assert (patched.json()["behavior"], patched.json()["rule"]) == ("deny", "Bash(ls)")
        bad = api.call("patch", f"{URL}/{rule_id}", {"rule": "Bash(("})
        assert bad.status_code == 400
        assert Rule.objects.get(pk=rule_id).rule == "Bash(ls)"
        assert api.call("delete", f"{URL}/{rule_id}").status_code == 204
        assert api.get(f"{URL}/{rule_id}").status_code == 404

    def test_it_lets_viewers_read_but_not_write(self, api_as: Any, alice: Any, bob: Any) -> None:
        rule_id = api_as(alice).post(URL, {"rule": "Bash(ls)", "behavior": "allow"}).json()["id"]
        viewer = api_as(bob)
        assert [rule["id"] for rule in viewer.get(URL).json()] == [rule_id]
        assert viewer.post(URL, {"rule": "Bash", "behavior": "allow"}).status_code == 403
        assert viewer.call("patch", f"{URL}/{rule_id}", {"note": "x"}).status_code == 403
        assert viewer.call("delete", f"{URL}/{rule_id}").status_code == 403

    def test_it_keeps_policy_settings_for_administrators(self, api_as: Any, alice: Any, admin: Any) -> None:
        approver = api_as(alice)
        refused = approver.post(URL, {"rule": "Bash(curl:*)", "behavior": "deny", "source": "policySettings"})
        assert refused.status_code == 403
        created = api_as(admin).post(URL, {"rule": "Bash(curl:*)", "behavior": "deny", "source": "policySettings"})
        assert created.status_code == 201
        rule_id = created.json()["id"]
        assert approver.call("patch", f"{URL}/{rule_id}", {"behavior": "allow"}).status_code == 403
        assert approver.call("delete", f"{URL}/{rule_id}").status_code == 403
        mine = approver.post(URL, {"rule": "Bash(ls)", "behavior": "allow"}).json()["id"]
        promoted = approver.call("patch", f"{URL}/{mine}", {"source": "policySettings"})
        assert promoted.status_code == 403
        assert Rule.objects.get(pk=rule_id).behavior == "deny"

    def test_it_filters_the_list(self, api_as: Any, alice: Any) -> None:
        api = api_as(alice)
        api.post(URL, {"rule": "Bash(ls)", "behavior": "allow"})
        api.post(URL, {"rule": "Read(~/.ssh/**)", "behavior": "deny", "source": "userSettings"})
        assert [r["rule"] for r in api.get(f"{URL}?behavior=deny").json()] == ["Read(~/.ssh/**)"]
        assert [r["rule"] for r in api.get(f"{URL}?source=localSettings").json()] == ["Bash(ls)"]
        assert api.get(f"{URL}?source=nowhere").status_code == 400


@pytest.mark.django_db
class RuleExplainTests:
    def test_it_explains_with_the_teams_rules_and_writes_nothing(self, api_as: Any, alice: Any) -> None:
        api = api_as(alice)
        api.post(URL, {"rule": "Bash(git push:*)", "behavior": "deny", "source": "projectSettings"})
        response = api.post(f"{URL}/explain", {"tool_name": "Bash", "tool_input": {"command": "git push --force"}})
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["behavior"] == "deny"
        assert body["reason"]["rule"] == "Bash(git push:*)"
        assert any(step["layer"] == "denyRules" for step in body["trace"])
        assert [rule["rule"] for rule in body["rules_considered"]] == ["Bash(git push:*)"]
        assert not PermissionRequest.objects.exists()
        assert not Decision.objects.exists()

    def test_it_tries_extra_rules_without_saving_them(self, api_as: Any, bob: Any) -> None:
        response = api_as(bob).post(
            f"{URL}/explain",
            {
                "tool_name": "Bash",
                "tool_input": {"command": "npm test"},
                "cwd": "/tmp/p",
                "rules": [{"rule": "Bash(npm test)", "behavior": "allow", "source": "localSettings"}],
            },
        )
        assert response.status_code == 200, response.content
        assert response.json()["behavior"] == "allow"
        assert not Rule.objects.exists()

    def test_it_refuses_an_invalid_extra_rule(self, api_as: Any, alice: Any) -> None:
        response = api_as(alice).post(
            f"{URL}/explain",
            {
                "tool_name": "Bash",
                "rules": [{"rule": "Bash(", "behavior": "allow", "source": "localSettings"}],
            },
        )
        assert response.status_code == 400
        assert "rules" in response.json()["error"]["fields"]
