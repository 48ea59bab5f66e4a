"""The stop switch: a team admin pauses an agent or the team; calls are denied (or asked) until resumed."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from approvals import services
from approvals.models import Decision, Pause
from tests.approvals.conftest import ASK_CALL, person_api

# An allow rule lets this call through while nothing is paused.
SAFE = {"tool_name": "Bash", "tool_input": {"command": "make build"}, "session_id": "s1", "cwd": "/tmp/proj"}
counter = iter(range(1_000_000))


def submit(agent: Any, call: dict[str, Any] = SAFE) -> Any:
    return services.request_submit(agent=agent, call={**call, "tool_use_id": f"ss{next(counter)}"})


@pytest.fixture
def allowed(default_team: Any) -> None:
    services.rule_create(rule="Bash(make:*)", behavior="allow", source="localSettings", team=default_team)


@pytest.mark.django_db
class StopSwitchTests:
    def test_it_denies_every_call_of_a_paused_agent_until_resumed(
        self, allowed: None, ci_bot: Any, registered_agent: Any, carol: Any
    ) -> None:
        other = registered_agent("other-bot-2", "default")
        assert submit(ci_bot.agent).request.state == "decided"
        api = person_api(carol)
        response = api.call("post", "/api/v1/pauses", {"agent": "ci-bot", "note": "runaway loop"})
        assert response.status_code == 201, response.content
        body = response.json()
        assert (body["agent"], body["answer"], body["paused_by"]) == ("ci-bot", "deny", "carol")
        denied = submit(ci_bot.agent)
        assert denied.decision.behavior == "deny" and denied.decision.reason["detail"] == "paused"
        assert "paused by carol" in denied.decision.message
        assert submit(ci_bot.agent, ASK_CALL).decision.behavior == "deny"  # an ask is not queued either
        assert submit(other.agent).decision.behavior == "allow"  # only that agent is stopped
        assert api.call("delete", f"/api/v1/pauses/{body['id']}").status_code == 204
        assert submit(ci_bot.agent).decision.behavior == "allow"
        assert api.call("delete", f"/api/v1/pauses/{body['id']}").status_code == 404

    def test_it_pauses_the_whole_team_with_ask(self, allowed: None, ci_bot: Any, carol: Any) -> None:
        response = person_api(carol).call("post", "/api/v1/pauses", {"team": "default", "answer": "ask"})
        assert response.status_code == 201 and response.json()["agent"] is None
        asked = submit(ci_bot.agent)
        # The allow rule no longer answers: a person must, and no classifier may.
        assert asked.request.state == "pending" and asked.decision is None
        assert asked.request.evaluation["reserved"] is True
        late = services.agent_create(name="registered-while-paused", team=ci_bot.agent.team)[0]
        assert submit(late).request.state == "pending"

    def test_it_writes_pause_and_resume_into_the_audit_chain(self, ci_bot: Any, carol: Any, default_team: Any) -> None:
        services.agent_create(name="second", team=default_team)
        pause = services.pause_set(team=default_team, agent=None, answer="deny", user=carol, surface="api")
        services.pause_lift(pause=pause, user=carol, surface="web")
        rows = list(Decision.objects.filter(tool_name__startswith="Gatehouse:").order_by("id"))
        # One row per agent the switch covers, for the pause and for the resume.
        assert [(r.tool_name, r.behavior, r.agent.name) for r in rows] == [
            ("Gatehouse:pause", "pause", "ci-bot"),
            ("Gatehouse:pause", "pause", "second"),
            ("Gatehouse:resume", "resume", "ci-bot"),
            ("Gatehouse:resume", "resume", "second"),
        ]
        assert {r.decided_by for r in rows} == {"carol"} and rows[0].message == "carol paused team default"
        call_command("audit_verify", stdout=io.StringIO())  # exits 1 on a broken chain

    @pytest.mark.parametrize("persona", ["alice", "bob", "mallory"])
    def test_it_lets_only_a_team_admin_pause_or_resume(
        self, persona: str, request: pytest.FixtureRequest, carol: Any, ci_bot: Any, default_team: Any
    ) -> None:
        person = request.getfixturevalue(persona)
        api = person_api(person)
        expected = 404 if persona == "mallory" else 403
        assert api.call("post", "/api/v1/pauses", {"team": "default"}).status_code == expected
        pause = services.pause_set(team=default_team, agent=None, answer="deny", user=carol, surface="api")
        assert api.call("delete", f"/api/v1/pauses/{pause.pk}").status_code == expected
        assert Pause.objects.filter(pk=pause.pk).exists()

    def test_it_refuses_bad_input_with_a_clear_error(self, carol: Any, ci_bot: Any) -> None:
        api = person_api(carol)
        cases = [
            ({"agent": "nobody"}, "no agent 'nobody'"),
            ({"answer": "allow"}, "allow"),
            ({"team": "default", "extra": 1}, "extra"),
        ]
        for body, words in cases:
            response = api.call("post", "/api/v1/pauses", body)
            assert response.status_code == 400, body
            assert words in response.json()["error"]["message"], body
        assert not Pause.objects.exists()


@pytest.mark.django_db
class StopSwitchPageTests:
    def test_it_pauses_and_resumes_from_the_agents_page(self, allowed: None, carol: Any, ci_bot: Any) -> None:
        from django.test import Client

        client = Client()
        client.force_login(carol)
        page = client.get("/agents/").content.decode()
        assert 'id="stop-switch"' in page and "Pause</button>" in page
        response = client.post("/agents/pause/", {"team": ci_bot.agent.team_id, "agent": ci_bot.agent.pk})
        assert response.status_code == 302
        assert submit(ci_bot.agent).decision.behavior == "deny"
        pause = Pause.objects.get()
        assert f'id="pause-{pause.pk}"' in client.get("/agents/").content.decode()
        assert client.post(f"/pauses/{pause.pk}/resume/").status_code == 302
        assert submit(ci_bot.agent).decision.behavior == "allow"

    def test_it_refuses_an_approver_on_the_page(self, alice: Any, carol: Any, ci_bot: Any, default_team: Any) -> None:
        from django.test import Client

        client = Client()
        client.force_login(alice)
        assert 'id="stop-switch"' not in client.get("/agents/").content.decode()
        assert client.post("/agents/pause/", {"team": default_team.pk}).status_code == 403
        pause = services.pause_set(team=default_team, agent=None, answer="deny", user=carol, surface="api")
        assert client.post(f"/pauses/{pause.pk}/resume/").status_code == 403
