"""Batch decisions: identical pending calls decided in one press, each its own audit row."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.test import Client

from approvals import selectors, services
from approvals.models import Decision, PermissionRequest

BATCH = "/requests/decide-batch"


def ask(agent: Any, command: str = "pytest -q", **extra: Any) -> PermissionRequest:
    call = {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": "s1", "cwd": "/tmp/proj", **extra}
    result = services.request_submit(agent=agent, call=call)
    assert result.decision is None
    return result.request


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def post(user: Any, ids: list[Any], action: str = "once", **extra: Any) -> Any:
    data = {"ids": [str(i) for i in ids], "action": action, **extra}
    return client_for(user).post(BATCH, data, HTTP_ACCEPT="application/json")


@pytest.mark.django_db
class BatchDecideTests:
    def test_it_allows_each_identical_call_with_its_own_audit_row(self, alice: Any, ci_bot: Any) -> None:
        requests = [ask(ci_bot.agent) for _ in range(6)]
        response = post(alice, [r.pk for r in requests])
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["message"] == "Allowed 6 of 6 identical calls."
        assert len(body["cards"]) == 6 and all('data-state="decided"' in c["html"] for c in body["cards"])
        rows = Decision.objects.filter(request__in=requests)
        assert rows.count() == 6
        seen = {(d.behavior, d.decided_by, d.surface, d.reason_type) for d in rows}
        assert seen == {("allow", "alice", "web", "user")}
        assert len({d.hash for d in rows}) == 6, "each request is its own link of the chain"

    def test_it_denies_them_all_with_the_reason_given(self, alice: Any, ci_bot: Any) -> None:
        requests = [ask(ci_bot.agent, "npm publish") for _ in range(3)]
        response = post(alice, [r.pk for r in requests], "deny", message="not from CI")
        assert response.json()["message"] == "Denied 3 of 3 identical calls."
        assert set(Decision.objects.filter(request__in=requests).values_list("behavior", "message")) == {
            ("deny", "not from CI")
        }

    @pytest.mark.parametrize(
        "other",
        [
            {"command": "pytest -q tests/a"},
            {"command": "pytest -q", "session_id": "s2"},
            {"command": "pytest -q", "cwd": "/tmp/other"},
        ],
        ids=["input", "session", "cwd"],
    )
    def test_it_decides_nothing_when_one_call_differs(self, alice: Any, ci_bot: Any, other: dict[str, str]) -> None:
        same = [ask(ci_bot.agent) for _ in range(2)]
        different = ask(ci_bot.agent, **other)
        response = post(alice, [*[r.pk for r in same], different.pk])
        assert response.status_code == 400
        assert "not the same call" in response.json()["message"]
        assert Decision.objects.count() == 0

    def test_it_tells_who_won_the_one_decided_meanwhile_and_decides_it_only_once(
        self, alice: Any, admin: Any, ci_bot: Any
    ) -> None:
        requests = [ask(ci_bot.agent) for _ in range(4)]
        services.request_decide(requests[1].pk, services.Answer(behavior="deny", surface="telegram", user=admin))
        response = post(alice, [r.pk for r in requests])
        assert response.status_code == 200
        assert response.json()["message"] == (
            "Allowed 3 of 4 identical calls. Already decided by root via telegram (denied)."
        )
        assert Decision.objects.filter(request=requests[1]).get().decided_by == "root"
        assert Decision.objects.filter(request__in=requests).count() == 4

    def test_it_refuses_a_viewer_and_leaves_every_request_pending(self, bob: Any, ci_bot: Any) -> None:
        requests = [ask(ci_bot.agent) for _ in range(2)]
        response = post(bob, [r.pk for r in requests])
        assert response.status_code == 403
        assert PermissionRequest.objects.filter(state="pending").count() == 2

    def test_it_hides_another_teams_request(self, mallory: Any, ci_bot: Any) -> None:
        requests = [ask(ci_bot.agent) for _ in range(2)]
        assert post(mallory, [r.pk for r in requests]).status_code == 404
        assert Decision.objects.count() == 0

    @pytest.mark.parametrize(
        ("data", "problem"),
        [
            ({"action": "once"}, "ids: This field is required."),
            ({"ids": ["nope"], "action": "once"}, "every id must be a request id"),
            ({"ids": ["00000000-0000-0000-0000-000000000000"], "action": "always"}, "action:"),
        ],
        ids=["no-ids", "bad-id", "no-grants"],
    )
    def test_it_explains_bad_input(self, alice: Any, data: dict[str, Any], problem: str) -> None:
        response = client_for(alice).post(BATCH, data, HTTP_ACCEPT="application/json")
        assert response.status_code == 400
        assert problem in response.json()["message"]

    def test_it_refuses_a_request_named_twice(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        response = post(alice, [req.pk, req.pk])
        assert response.status_code == 400 and "each request once" in response.json()["message"]
        assert Decision.objects.count() == 0

    def test_it_caps_a_batch(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        with pytest.raises(services.ServiceError, match="at most"):
            services.request_decide_batch(requests=[req] * (services.BATCH_LIMIT + 1), behavior="allow", surface="web")

    def test_it_redirects_a_form_post_to_the_queue_with_the_outcome(self, alice: Any, ci_bot: Any) -> None:
        requests = [ask(ci_bot.agent) for _ in range(2)]
        response = client_for(alice).post(BATCH, {"ids": [str(r.pk) for r in requests], "action": "once"}, follow=True)
        assert "Allowed 2 of 2 identical calls." in response.content.decode()

    def test_the_card_names_its_batch_key_only_for_those_who_decide(self, alice: Any, bob: Any, ci_bot: Any) -> None:
        first, second = ask(ci_bot.agent), ask(ci_bot.agent)
        other = ask(ci_bot.agent, "pytest -x")
        html = client_for(alice).get("/").content.decode()
        key = selectors.same_call_key(first)
        assert key == selectors.same_call_key(second) != selectors.same_call_key(other)
        assert html.count(f'data-batch="{key}"') == 2
        assert 'data-batch-label="Bash pytest -q from ci-bot, session s1"' in html
        assert "data-batch=" not in client_for(bob).get("/").content.decode()


@pytest.mark.django_db(transaction=True)
class BatchRaceTests:
    def test_two_people_pressing_allow_all_at_once_decide_each_request_once(
        self, alice: Any, admin: Any, ci_bot: Any
    ) -> None:
        from django.db import connection

        requests = [ask(ci_bot.agent) for _ in range(5)]
        barrier = threading.Barrier(2)
        won: list[int] = []

        def press(user: Any, behavior: str) -> None:
            barrier.wait()
            try:
                results = services.request_decide_batch(
                    requests=list(reversed(requests)) if behavior == "deny" else requests,
                    behavior=behavior,
                    surface="web",
                    user=user,
                )
                won.append(sum(r.won for r in results))
            finally:
                connection.close()

        threads = [threading.Thread(target=press, args=args) for args in ((alice, "allow"), (admin, "deny"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sum(won) == 5
        assert Decision.objects.filter(request__in=requests).count() == 5
        assert PermissionRequest.objects.filter(pk__in=[r.pk for r in requests], state="pending").count() == 0


@pytest.mark.django_db
class BatchDecideApiTests:
    URL = "/api/v1/permission-requests/decisions"

    def test_it_decides_each_and_reports_the_one_lost(self, api_as: Any, alice: Any, admin: Any, pending: Any) -> None:
        requests = [pending() for _ in range(3)]
        first = api_as(admin).post(f"/api/v1/permission-requests/{requests[0].pk}/decision", {"behavior": "deny"})
        assert first.status_code == 200
        response = api_as(alice).post(self.URL, {"ids": [str(r.pk) for r in requests], "behavior": "allow"})
        assert response.status_code == 200, response.content
        results = response.json()["results"]
        assert [r["won"] for r in results] == [False, True, True]
        assert results[0]["message"] == "already decided by root via api (denied)"
        assert [r["request"]["decision"]["behavior"] for r in results] == ["deny", "allow", "allow"]
        assert Decision.objects.filter(request__in=requests).count() == 3

    def test_it_refuses_different_calls_and_agents(self, api_as: Any, alice: Any, ci_bot: Any, pending: Any) -> None:
        one, other = pending(), pending(tool_input={"command": "npm pack"})
        response = api_as(alice).post(self.URL, {"ids": [str(one.pk), str(other.pk)], "behavior": "allow"})
        assert response.status_code == 400 and "not the same call" in response.content.decode()
        assert api_as(ci_bot).post(self.URL, {"ids": [str(one.pk)], "behavior": "allow"}).status_code == 403
        assert Decision.objects.count() == 0
