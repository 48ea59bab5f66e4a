"""Deciding over HTTP: the first answer wins, every later one gets 409 naming the winner."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from approvals.models import Decision, Role, Rule
from tests.approvals.conftest import Api
from tests.round_trips import round_trips


def decide_url(request: Any) -> str:
    return f"/api/v1/permission-requests/{request.pk}/decision"


@pytest.mark.django_db
class DecideTests:
    def test_it_lets_an_approver_allow_and_records_who_and_how(self, api_as: Any, alice: Any, pending: Any) -> None:
        request = pending()
        response = api_as(alice).post(decide_url(request), {"behavior": "allow", "message": "go ahead"})
        assert response.status_code == 200, response.content
        decision = response.json()["decision"]
        assert decision["behavior"] == "allow"
        assert decision["decided_by"] == "alice"
        assert decision["surface"] == "api"
        assert decision["reason"]["type"] == "user"
        row = Decision.objects.get(request=request)
        assert (row.decided_by_user, row.surface) == (alice, "api")

    def test_it_answers_409_naming_the_winner_to_the_second_decider(
        self, api_as: Any, alice: Any, admin: Any, pending: Any
    ) -> None:
        request = pending()
        assert api_as(alice).post(decide_url(request), {"behavior": "deny"}).status_code == 200
        late = api_as(admin).post(decide_url(request), {"behavior": "allow"})
        assert late.status_code == 409
        error = late.json()["error"]
        assert error["code"] == "already_decided"
        assert error["message"] == "already decided by alice via api (denied)"
        assert late.json()["request"]["decision"]["behavior"] == "deny"
        assert Decision.objects.filter(request=request).count() == 1

    def test_it_names_a_cancelled_request_in_the_409(self, api_as: Any, alice: Any, ci_bot: Any, pending: Any) -> None:
        request = pending()
        cancel_url = f"/api/v1/permission-requests/{request.pk}/cancel"
        cancel = Api(ci_bot.auth).post(cancel_url, {"reason": "answered locally"})
        assert cancel.status_code == 200
        assert cancel.json()["status"] == "cancelled"
        late = api_as(alice).post(decide_url(request), {"behavior": "allow"})
        assert late.status_code == 409
        assert late.json()["error"]["message"] == "already cancelled by agent ci-bot via local (answered locally)"

    def test_it_records_surface_web_for_a_browser_session_with_csrf(self, alice: Any, pending: Any) -> None:
        request = pending()
        client = Client(enforce_csrf_checks=True)
        client.force_login(alice)
        refused = Api(client=client).post(decide_url(request), {"behavior": "allow"})
        assert refused.status_code == 403
        assert "CSRF" in refused.json()["error"]["message"]
        client.get("/accounts/login/")
        token = client.cookies["csrftoken"].value
        response = Api(client=client).post(decide_url(request), {"behavior": "allow"}, HTTP_X_CSRFTOKEN=token)
        assert response.status_code == 200, response.content
        assert response.json()["decision"]["surface"] == "web"

    def test_it_saves_a_rule_when_asked_to_remember(self, api_as: Any, alice: Any, pending: Any) -> None:
        request = pending(tool_input={"command": "npm run build"}, session_id="s9")
        response = api_as(alice).post(
            decide_url(request), {"behavior": "allow", "remember": "session", "remember_hours": 2}
        )
        assert response.status_code == 200, response.content
        rule = Rule.objects.get()
        assert (rule.rule, rule.behavior, rule.scope, rule.session_id) == (
            "Bash(npm run build:*)",
            "allow",
            "session",
            "s9",
        )
        assert rule.expires_at is not None
        assert response.json()["decision"]["reason"]["saved_rule"] == "Bash(npm run build:*)"

    def test_it_passes_an_approvers_edited_input_to_the_agent(self, api_as: Any, alice: Any, pending: Any) -> None:
        request = pending()
        edited = {"command": "rm -rf build/cache"}
        response = api_as(alice).post(decide_url(request), {"behavior": "allow", "updated_input": edited})
        assert response.json()["decision"]["updated_input"] == edited

    def test_it_refuses_a_viewer(self, api_as: Any, bob: Any, pending: Any) -> None:
        request = pending()
        response = api_as(bob).post(decide_url(request), {"behavior": "allow"})
        assert response.status_code == 403
        assert "approver" in response.json()["error"]["message"]
        assert not Decision.objects.filter(request=request).exists()

    def test_it_refuses_every_agent_even_the_requester(self, ci_bot: Any, pending: Any) -> None:
        request = pending()
        response = Api(ci_bot.auth).post(decide_url(request), {"behavior": "allow"})
        assert response.status_code == 403
        assert not Decision.objects.filter(request=request).exists()

    def test_it_hides_another_teams_request_from_its_approver(self, api_as: Any, mallory: Any, pending: Any) -> None:
        response = api_as(mallory).post(decide_url(pending()), {"behavior": "allow"})
        assert response.status_code == 404

    def test_it_reads_the_token_the_request_and_its_members_once_each_in_one_round_trip(
        self, api_as: Any, alice: Any, pending: Any
    ) -> None:
        request, client = pending(), api_as(alice)
        with round_trips() as trips:
            response = client.post(decide_url(request), {"behavior": "deny"})
        assert response.status_code == 200, response.content
        reads = [sql for trip in trips for sql in trip if sql.startswith("SELECT")]
        token_reads = [q for q in reads if 'FROM "approvals_personaltoken"' in q]
        member_reads = [q for q in reads if 'FROM "approvals_membership"' in q]
        assert len(token_reads) == 1 and len(member_reads) == 1, reads
        # A person's token is never looked up among the agents'.
        assert not [q for q in reads if 'FROM "approvals_agent"' in q], reads
        if connection.vendor == "postgresql":
            # The token's read, the request's and its team's members: one round trip.
            [first] = [trip for trip in trips if token_reads[0] in trip]
            assert member_reads[0] in first and any('"approvals_permissionrequest" t0' in q for q in first), trips

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"behavior": "maybe"}, "behavior"),
            ({"behavior": "allow", "remember": "forever"}, "remember"),
            ({"behavior": "allow", "remember_hours": -1}, "remember_hours"),
            ({"behavior": "allow", "updated_input": "rm -rf /"}, "updated_input"),
            ({"behavior": "allow", "colour": "red"}, "colour"),
        ],
    )
    def test_it_rejects_bad_answers_with_the_field(
        self, api_as: Any, alice: Any, pending: Any, body: dict[str, Any], field: str
    ) -> None:
        request = pending()
        response = api_as(alice).post(decide_url(request), body)
        assert response.status_code == 400
        assert field in response.json()["error"]["fields"]
        assert not Decision.objects.filter(request=request).exists()


@pytest.mark.django_db(transaction=True)
class ConcurrentDecideTests:
    def test_it_lets_exactly_one_of_six_racing_approvers_win(self, alice: Any, admin: Any, ci_bot: Any) -> None:
        import threading

        from django.db import connection

        from approvals import services
        from tests.approvals.conftest import ASK_CALL, person_api

        request = services.request_submit(agent=ci_bot.agent, call={**ASK_CALL, "tool_use_id": "race"}).request
        clients = [person_api(alice if index % 2 else admin) for index in range(6)]
        barrier = threading.Barrier(len(clients))
        answers: list[tuple[int, dict[str, Any]]] = []

        def decide(api: Api, behavior: str) -> None:
            try:
                barrier.wait(timeout=10)
                response = api.post(decide_url(request), {"behavior": behavior})
                answers.append((response.status_code, response.json()))
            finally:
                connection.close()

        threads = [
            threading.Thread(target=decide, args=(api, "allow" if index % 2 else "deny"))
            for index, api in enumerate(clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        codes = sorted(code for code, _ in answers)
        assert codes == [200, 409, 409, 409, 409, 409], answers
        winner = next(body for code, body in answers if code == 200)["decision"]
        for code, body in answers:
            if code == 409:
                assert body["error"]["message"].startswith(("already decided by", "already being decided by"))
        row = Decision.objects.get(request=request)
        assert (row.behavior, row.decided_by) == (winner["behavior"], winner["decided_by"])


# Every kind of person against one request: no membership, each role, a membership in
# another team only; active or not; superuser or not. The one read of the request and the
# role answers as `permissions.role_in` does: 404 unless they may see it, 403 unless they
# may decide it.
PEOPLE = list(itertools.product([None, *Role, "elsewhere"], [True, False], [True, False]))


@pytest.mark.django_db
@pytest.mark.parametrize(("membership", "active", "superuser"), PEOPLE)
def test_who_may_decide_is_who_may_decide(
    membership: Any, active: bool, superuser: bool, default_team: Any, other_team: Any, pending: Any
) -> None:
    from django.contrib.auth.models import User

    from approvals import permissions, services
    from approvals.models import Membership

    person = User.objects.create_user("someone", is_superuser=superuser)
    if membership is not None:
        team = other_team if membership == "elsewhere" else default_team
        Membership.objects.create(user=person, team=team, role=Role.ADMIN if membership == "elsewhere" else membership)
    token = services.personal_token_create(user=person)
    User.objects.filter(pk=person.pk).update(is_active=active)
    person.refresh_from_db()
    request = pending()
    expected = 404
    if permissions.can_see(person, default_team.pk):
        expected = 200 if permissions.can_decide(person, request) else 403
    response = Api({"HTTP_AUTHORIZATION": f"Bearer {token}"}).post(decide_url(request), {"behavior": "deny"})
    if not active:  # an inactive person's token is refused before any request is looked at
        assert response.status_code == 401, response.content
        return
    assert response.status_code == expected, response.content
    assert Decision.objects.filter(request=request).exists() == (expected == 200)
    missing = Api({"HTTP_AUTHORIZATION": f"Bearer {token}"}).post(
        f"/api/v1/permission-requests/{uuid.uuid4()}/decision", {"behavior": "deny"}
    )
    assert missing.status_code == 404


# The request and its team's members are read with a person's token, before the token is
# known good: a token that is not (any more) good gets the same 401 whatever request it
# names, and decides nothing.
DEAD_TOKENS = ["revoked", "expired", "its person inactive", "unknown", "an agent's prefix"]


@pytest.mark.django_db
@pytest.mark.parametrize("dead", DEAD_TOKENS)
def test_a_dead_token_learns_nothing_of_the_request_it_names(dead: str, alice: Any, pending: Any) -> None:
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.utils import timezone

    from approvals import services
    from approvals.models import PersonalToken

    token = services.personal_token_create(user=alice)
    if dead == "revoked":
        PersonalToken.objects.filter(user=alice).update(revoked_at=timezone.now())
    elif dead == "expired":
        PersonalToken.objects.filter(user=alice).update(expires_at=timezone.now() - timedelta(seconds=1))
    elif dead == "its person inactive":
        User.objects.filter(pk=alice.pk).update(is_active=False)
    elif dead == "unknown":
        token = token[:-1] + ("A" if token[-1] != "A" else "B")
    else:
        token = "gha_" + token.removeprefix("ghp_")
    request = pending()
    answers = [
        Api({"HTTP_AUTHORIZATION": f"Bearer {token}"}).post(url, {"behavior": "allow"})
        for url in (decide_url(request), f"/api/v1/permission-requests/{uuid.uuid4()}/decision")
    ]
    assert [a.status_code for a in answers] == [401, 401]
    assert answers[0].json() == answers[1].json()
    assert not Decision.objects.filter(request=request).exists()
