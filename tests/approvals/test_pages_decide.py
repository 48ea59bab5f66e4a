"""Deciding from a card: a CSRF-protected POST that calls the race's one door, request_decide."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client

from approvals import services
from approvals.models import Decision, PermissionRequest, Rule
from tests.round_trips import round_trips


def ask(agent: Any, command: str = "rm -rf build") -> PermissionRequest:
    call = {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": "s1", "cwd": "/tmp/proj"}
    result = services.request_submit(agent=agent, call=call)
    assert result.decision is None
    return result.request


def client_for(user: Any, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def csrf_token(client: Client) -> str:
    """Load a page so Django sets the CSRF cookie, as a browser would."""
    client.get("/")
    return str(client.cookies["csrftoken"].value)


@pytest.mark.django_db
class DecidePostTests:
    def test_it_allows_once_and_records_alice_via_web(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        response = client_for(alice).post(f"/requests/{req.pk}/decide", {"action": "once"})
        assert response.status_code == 302
        decision = Decision.objects.get(request=req)
        assert (decision.behavior, decision.decided_by, decision.surface) == ("allow", "alice", "web")
        assert decision.decided_by_user == alice

    def test_it_answers_json_with_the_updated_card_for_the_page_script(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        response = client_for(alice).post(
            f"/requests/{req.pk}/decide", {"action": "once"}, HTTP_ACCEPT="application/json"
        )
        assert response.status_code == 200
        body = response.json()
        assert body["ok"] is True and body["id"] == str(req.pk)
        assert 'decided by <strong class="decider">alice</strong> via web' in body["html"]

    def test_it_tells_the_second_decider_who_won(self, alice: Any, admin: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        assert client_for(alice).post(f"/requests/{req.pk}/decide", {"action": "once"}).status_code == 302
        response = client_for(admin).post(
            f"/requests/{req.pk}/decide", {"action": "deny"}, HTTP_ACCEPT="application/json"
        )
        assert response.status_code == 409
        assert response.json()["message"] == "Already decided by alice via web (allowed)."
        assert Decision.objects.filter(request=req).count() == 1

    def test_it_refuses_a_forged_post_from_bob_the_viewer(self, bob: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        client = client_for(bob, enforce_csrf_checks=True)
        token = csrf_token(client)
        response = client.post(f"/requests/{req.pk}/decide", {"action": "once", "csrfmiddlewaretoken": token})
        assert response.status_code == 403
        req.refresh_from_db()
        assert req.state == "pending"

    def test_it_hides_another_teams_request_from_mallory(self, mallory: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        assert client_for(mallory).post(f"/requests/{req.pk}/decide", {"action": "once"}).status_code == 404
        req.refresh_from_db()
        assert req.state == "pending"

    def test_it_rejects_a_post_without_a_csrf_token(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        response = client_for(alice, enforce_csrf_checks=True).post(f"/requests/{req.pk}/decide", {"action": "once"})
        assert response.status_code == 403
        req.refresh_from_db()
        assert req.state == "pending"

    def test_it_denies_with_the_reason_alice_typed(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        client_for(alice).post(f"/requests/{req.pk}/decide", {"action": "deny", "message": "use make clean"})
        decision = Decision.objects.get(request=req)
        assert (decision.behavior, decision.message) == ("deny", "use make clean")

    def test_it_saves_a_project_rule_for_some_hours_when_always_allowing(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent, "npm run build")
        client_for(alice).post(f"/requests/{req.pk}/decide", {"action": "always", "scope": "project", "hours": "8"})
        rule = Rule.objects.get()
        assert (rule.behavior, rule.scope, rule.project_path) == ("allow", "project", "/tmp/proj")
        assert rule.expires_at is not None and rule.created_by == alice
        assert Decision.objects.get(request=req).reason["saved_rule"] == rule.rule

    def test_it_saves_a_session_rule_for_allow_for_session(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent, "npm run build")
        client_for(alice).post(f"/requests/{req.pk}/decide", {"action": "session"})
        rule = Rule.objects.get()
        assert (rule.scope, rule.session_id, rule.source) == ("session", "s1", "session")

    def test_it_answers_400_to_an_unknown_action(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        response = client_for(alice).post(
            f"/requests/{req.pk}/decide", {"action": "maybe"}, HTTP_ACCEPT="application/json"
        )
        assert response.status_code == 400
        assert "action" in response.json()["message"]
        req.refresh_from_db()
        assert req.state == "pending"

    @pytest.mark.parametrize("batch", [False, True], ids=["one card", "a batch of three"])
    def test_it_reads_each_request_with_its_teams_members_once_before_deciding(
        self, alice: Any, ci_bot: Any, batch: bool
    ) -> None:
        asked = [ask(ci_bot.agent, "rm -rf build") for _ in range(3 if batch else 1)]
        client = client_for(alice)
        if batch:
            url, data = "/requests/decide-batch", {"ids": [str(req.pk) for req in asked], "action": "once"}
        else:
            url, data = f"/requests/{asked[0].pk}/decide", {"action": "once"}
        with round_trips() as trips:
            response = client.post(url, data, HTTP_ACCEPT="application/json")
        assert response.status_code == 200, response.content
        # Up to the first decision's fence: the session, the person, then per request one
        # round trip for it and its team's members (permissions.request_and_role), which
        # serves both checks and the decision itself; no membership read of its own.
        fence = next(i for i, trip in enumerate(trips) if any(sql.startswith("UPDATE") for sql in trip))
        reads = [sql for trip in trips[:fence] for sql in trip]
        requests = [sql for sql in reads if '"approvals_permissionrequest" t0' in sql]
        members = [sql for sql in reads if 'FROM "approvals_membership"' in sql]
        assert len(requests) == len(members) == len(asked), reads
        assert all('"team_id" = (SELECT' in sql for sql in members), members
        if connection.vendor == "postgresql":
            assert all([request, member] in trips for request, member in zip(requests, members, strict=True)), trips
        assert Decision.objects.filter(request__in=asked, behavior="allow").count() == len(asked)

    def test_it_refuses_a_get(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        assert client_for(alice).get(f"/requests/{req.pk}/decide").status_code == 405
