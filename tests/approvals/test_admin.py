"""The admin: people, teams and memberships are manageable; the audit log cannot be changed."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from approvals import services
from approvals.models import Decision, Membership, Rule, Team


@pytest.fixture
def staff(admin: Any) -> Client:
    client = Client()
    client.force_login(admin)
    return client


@pytest.mark.django_db
class AdminTests:
    def test_it_shows_every_model_page(self, staff: Client, ci_bot: Any) -> None:
        services.request_submit(agent=ci_bot.agent, call={"tool_name": "TaskList", "tool_use_id": "adm"})
        for page in [
            "team",
            "membership",
            "agent",
            "personaltoken",
            "permissionrequest",
            "decision",
            "rule",
            "chatidentity",
            "sessiondenials",
        ]:
            assert staff.get(f"/admin/approvals/{page}/").status_code == 200, page
        assert staff.get("/admin/auth/user/").status_code == 200

    def test_it_never_adds_changes_or_deletes_an_audit_row(self, staff: Client, ci_bot: Any) -> None:
        call = {"tool_name": "TaskList", "tool_input": {"n": 1}, "tool_use_id": "ro"}  # denied: TaskList takes none
        result = services.request_submit(agent=ci_bot.agent, call=call)
        row = result.decision
        assert row is not None
        assert staff.get("/admin/approvals/decision/add/").status_code == 403
        assert staff.get(f"/admin/approvals/decision/{row.pk}/delete/").status_code == 403
        detail = staff.get(f"/admin/approvals/decision/{row.pk}/change/")
        assert detail.status_code == 200
        assert b'name="_save"' not in detail.content
        posted = staff.post(f"/admin/approvals/decision/{row.pk}/change/", {"behavior": "allow"})
        assert posted.status_code == 403
        bulk = staff.post("/admin/approvals/decision/", {"action": "delete_selected", "_selected_action": [row.pk]})
        assert bulk.status_code in (200, 302, 403)
        assert Decision.objects.get(pk=row.pk).behavior == "deny"

    def test_it_manages_teams_with_their_memberships(self, staff: Client, alice: Any) -> None:
        response = staff.post(
            "/admin/approvals/team/add/",
            {
                "name": "platform",
                "memberships-TOTAL_FORMS": "1",
                "memberships-INITIAL_FORMS": "0",
                "memberships-MIN_NUM_FORMS": "0",
                "memberships-MAX_NUM_FORMS": "1000",
                "memberships-0-user": str(alice.pk),
                "memberships-0-role": "viewer",
            },
        )
        assert response.status_code == 302, response.content[:2000]
        team = Team.objects.get(name="platform")
        assert Membership.objects.get(team=team, user=alice).role == "viewer"

    def test_it_refuses_an_invalid_rule_in_the_admin(self, staff: Client, default_team: Any) -> None:
        response = staff.post(
            "/admin/approvals/rule/add/",
            {
                "rule": "Bash(",
                "behavior": "deny",
                "source": "localSettings",
                "team": str(default_team.pk),
                "scope": "global",
                "project_path": "",
                "session_id": "",
                "note": "",
            },
        )
        assert response.status_code == 200
        assert b"unbalanced parenthesis" in response.content
        assert not Rule.objects.exists()

    def test_it_revokes_agents_through_an_action(self, staff: Client, ci_bot: Any) -> None:
        response = staff.post("/admin/approvals/agent/", {"action": "revoke", "_selected_action": [ci_bot.agent.pk]})
        assert response.status_code == 302
        ci_bot.agent.refresh_from_db()
        assert ci_bot.agent.revoked_at is not None
        assert Client().get("/api/v1/health", HTTP_AUTHORIZATION=f"Bearer {ci_bot.token}").status_code == 401
