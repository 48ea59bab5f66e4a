"""The rules page: grouped by source, add/edit/delete for approvers, policySettings read-only, explain."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from approvals import services
from approvals.models import Rule


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def new_rule(team: Any, text: str, source: str = "projectSettings", behavior: str = "allow") -> Rule:
    return services.rule_create(rule=text, behavior=behavior, source=source, team=team)


def form(**overrides: Any) -> dict[str, Any]:
    data = {"rule": "Bash(npm run test:*)", "behavior": "allow", "source": "localSettings", "scope": "global"}
    data.update(overrides)
    return data


@pytest.mark.django_db
class RulesPageTests:
    def test_it_groups_rules_by_source_in_precedence_order(self, alice: Any, default_team: Any) -> None:
        new_rule(default_team, "Bash(git push:*)", source="policySettings", behavior="deny")
        new_rule(default_team, "Read", source="userSettings")
        new_rule(default_team, "Bash(ls:*)", source="session")
        html = client_for(alice).get("/rules/").content.decode()
        order = [html.index(f'id="source-{s}"') for s in ("userSettings", "policySettings", "session")]
        assert order == sorted(order)

    def test_it_lets_alice_add_a_rule(self, alice: Any, default_team: Any) -> None:
        response = client_for(alice).post("/rules/", form(team=default_team.pk))
        assert response.status_code == 302
        rule = Rule.objects.get()
        assert (rule.rule, rule.source, rule.created_by) == ("Bash(npm run test:*)", "localSettings", alice)

    def test_it_explains_a_syntax_error_instead_of_saving(self, alice: Any, default_team: Any) -> None:
        response = client_for(alice).post("/rules/", form(team=default_team.pk, rule="Bash(unclosed"))
        assert response.status_code == 400
        assert "invalid rule" in response.content.decode()
        assert not Rule.objects.exists()

    def test_it_refuses_bob_adding_a_rule(self, bob: Any, default_team: Any) -> None:
        assert client_for(bob).post("/rules/", form(team=default_team.pk)).status_code == 403
        assert not Rule.objects.exists()

    def test_it_keeps_policy_settings_read_only(self, alice: Any, default_team: Any) -> None:
        rule = new_rule(default_team, "Bash(git push:*)", source="policySettings", behavior="deny")
        client = client_for(alice)
        assert f"/rules/{rule.pk}/edit/" not in client.get("/rules/").content.decode()
        assert client.post(f"/rules/{rule.pk}/delete/").status_code == 403
        assert client.post(f"/rules/{rule.pk}/edit/", form(team=default_team.pk)).status_code == 403
        assert "policySettings" not in client.get("/rules/").content.decode().split('id="add"')[1].split("</select>")[1]
        assert Rule.objects.filter(pk=rule.pk, rule="Bash(git push:*)").exists()

    def test_it_lets_alice_edit_and_delete(self, alice: Any, default_team: Any) -> None:
        rule = new_rule(default_team, "Bash(ls:*)")
        client = client_for(alice)
        response = client.post(f"/rules/{rule.pk}/edit/", form(team=default_team.pk, rule="Bash(ls -la)"))
        assert response.status_code == 302
        rule.refresh_from_db()
        assert rule.rule == "Bash(ls -la)"
        assert client.post(f"/rules/{rule.pk}/delete/").status_code == 302
        assert not Rule.objects.exists()

    def test_it_hides_another_teams_rules_from_mallory(self, mallory: Any, default_team: Any) -> None:
        rule = new_rule(default_team, "Bash(ls:*)")
        client = client_for(mallory)
        assert "Bash(ls:*)" not in client.get("/rules/").content.decode()
        assert client.post(f"/rules/{rule.pk}/delete/").status_code == 404

    def test_it_explains_a_call_with_the_teams_rules(self, bob: Any, default_team: Any) -> None:
        new_rule(default_team, "Bash(git push:*)", source="policySettings", behavior="deny")
        data = {"tool_name": "Bash", "tool_input": '{"command": "git push --force"}', "cwd": "/tmp", "mode": "default"}
        html = client_for(bob).post("/rules/explain/", data).content.decode()
        assert 'id="explained"' in html
        assert '<span class="pill pill-deny">deny</span>' in html
        assert "denyRules" in html

    def test_it_rejects_tool_input_that_is_not_json(self, alice: Any) -> None:
        data = {"tool_name": "Bash", "tool_input": "{command: ls", "mode": "default"}
        response = client_for(alice).post("/rules/explain/", data)
        assert response.status_code == 400
        assert "Not valid JSON" in response.content.decode()

    def test_it_lints_a_duplicate_rule(self, alice: Any, default_team: Any) -> None:
        new_rule(default_team, "Bash(ls:*)")
        new_rule(default_team, "Bash(ls:*)")
        html = client_for(alice).get("/rules/").content.decode()
        assert 'id="lint"' in html
