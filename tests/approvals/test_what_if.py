"""What-if: replay the team's recorded calls with a draft of rule changes, before saving it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from approvals import learning, services
from approvals.models import Decision, Rule
from tests.conftest import AgentPersona
from tests.policy.calls import gather

URL = "/api/v1/rules/what-if"
SINCE = "2000-01-01T00:00:00Z"


@pytest.fixture
def record(ci_bot: AgentPersona) -> Callable[..., Any]:
    """`record("npm run test", human="allow")`: a call ci-bot made, answered by Alice (or not)."""
    counter = iter(range(100_000))

    def make(command: str = "", *, human: str | None = None, session: str = "s1", **call: Any) -> Any:
        call = {"tool_name": "Bash", "tool_input": {"command": command}, "cwd": "/tmp/proj", **call}
        call.update(session_id=session, tool_use_id=f"toolu_{next(counter)}")
        # As Gatehouse's hook sends it: with the agent machine's facts.
        call.setdefault("facts", gather(call["tool_name"], call["tool_input"], call["cwd"]))
        result = services.request_submit(agent=ci_bot.agent, call=call)
        if human is not None:
            assert result.decision is None, f"the engine should ask for {call}"
            services.request_decide(
                result.request.pk, services.Answer(behavior=human, surface="api", decided_by="alice")
            )
        return result.request

    return make


def allow(rule: str, **extra: Any) -> dict[str, Any]:
    return {"rule": rule, "behavior": "allow", "source": "localSettings", **extra}


@pytest.mark.django_db
class WhatIfTests:
    def test_it_answers_counts_changed_calls_and_what_people_answered(
        self, api_as: Any, alice: Any, record: Any
    ) -> None:
        allowed = record("npm run test", human="allow")
        denied = record("npm run test -- --all", human="deny")
        record("npm run build", human="allow")
        response = api_as(alice).post(URL, {"add": [allow("Bash(npm run test:*)")], "since": SINCE})
        assert response.status_code == 200, response.content
        body = response.json()
        assert set(body) == {"counts", "changed", "flagged", "uncertain", "next"}
        assert body["counts"] == {"ask->allow": 2}
        assert body["flagged"] == 1
        assert body["next"] is None
        assert body["changed"] == [
            {
                "request_id": str(denied.pk),
                "tool_name": "Bash",
                "tool_input": {"command": "npm run test -- --all"},
                "old": "ask",
                "new": "allow",
                "human": "deny",
            },
            {
                "request_id": str(allowed.pk),
                "tool_name": "Bash",
                "tool_input": {"command": "npm run test"},
                "old": "ask",
                "new": "allow",
                "human": "allow",
            },
        ]

    def test_it_replays_removing_and_replacing_saved_rules(self, api_as: Any, alice: Any, record: Any) -> None:
        deny = services.rule_create(rule="Bash(curl:*)", behavior="deny", source="projectSettings", team=alice_team())
        record("curl https://example.com")
        record("curl https://example.org")
        api = api_as(alice)
        removed = api.post(URL, {"remove": [deny.pk], "since": SINCE}).json()
        assert removed["counts"] == {"deny->ask": 2}
        replaced = api.post(URL, {"replace": [{"id": deny.pk, "behavior": "allow"}], "since": SINCE}).json()
        assert replaced["counts"] == {"deny->allow": 2}
        assert replaced["flagged"] == 0  # the engine denied them, no person did
        assert Rule.objects.get(pk=deny.pk).behavior == "deny"  # nothing saved

    def test_it_leaves_out_changes_that_todays_rules_already_made(self, api_as: Any, alice: Any, record: Any) -> None:
        record("make lint")
        services.rule_create(rule="Bash(make lint)", behavior="allow", source="localSettings", team=alice_team())
        body = api_as(alice).post(URL, {"add": [allow("Bash(make:*)")], "since": SINCE}).json()
        assert body["counts"] == {}
        assert body["changed"] == []

    def test_it_replays_an_empty_draft_as_every_call_was_decided(self, api_as: Any, alice: Any, record: Any) -> None:
        services.rule_create(rule="Bash(git push:*)", behavior="ask", source="projectSettings", team=alice_team())
        services.rule_create(rule="Bash(rm:*)", behavior="deny", source="policySettings", team=alice_team())
        services.rule_create(rule="Bash(git status)", behavior="allow", source="localSettings", team=alice_team())
        calls = ["git status", "git push --force", "rm -rf /", "ls && rm x", "echo $(id)", "git status; ls"]
        for command in calls:
            record(command)
        record(permission_mode="bypassPermissions", tool_name="Bash", command="curl x | sh")
        record(
            tool_name="Edit", tool_input={"file_path": "/tmp/proj/.git/config", "old_string": "a", "new_string": "b"}
        )
        found = learning.what_if(
            team_id=alice_team().pk,
            draft=learning.Draft(),
            since=timezone.now() - timedelta(hours=1),
            until=timezone.now(),
            offset=0,
            limit=50,
        )
        assert found.replayed == len(calls) + 2
        assert (found.total_changed, dict(found.counts)) == (0, {})

    def test_it_pages_changed_calls_with_a_cursor(self, api_as: Any, alice: Any, record: Any) -> None:
        made = [record(f"pytest -k case{i}") for i in range(5)]
        api = api_as(alice)
        seen: list[str] = []
        path = f"{URL}?limit=2"
        pages = 0
        while path:
            body = api.post(path, {"add": [allow("Bash(pytest:*)")], "since": SINCE}).json()
            assert body["counts"] == {"ask->allow": 5}
            seen += [change["request_id"] for change in body["changed"]]
            pages += 1
            path = f"{URL}?limit=2&cursor={body['next']}" if body["next"] else ""
        assert pages == 3
        assert seen == [str(r.pk) for r in reversed(made)]

    def test_it_pins_the_end_of_the_period_across_pages(self, api_as: Any, alice: Any, record: Any) -> None:
        for i in range(3):
            record(f"pytest -k first{i}")
        api = api_as(alice)
        draft = {"add": [allow("Bash(pytest:*)")], "since": SINCE}
        first = api.post(f"{URL}?limit=2", draft).json()
        record("pytest -k later")  # recorded after the first page: not part of this walk
        second = api.post(f"{URL}?limit=2&cursor={first['next']}", draft).json()
        assert second["counts"] == {"ask->allow": 3}
        assert len(second["changed"]) == 1 and second["next"] is None

    def test_it_counts_calls_that_depend_on_paths_as_uncertain(self, api_as: Any, alice: Any, record: Any) -> None:
        record(tool_name="Read", tool_input={"file_path": "/etc/hosts"})
        record("cp ./notes.txt ./copy.txt")
        record("make deploy")
        draft = [allow("Read"), allow("Bash(cp:*)"), allow("Bash(make deploy)")]
        body = api_as(alice).post(URL, {"add": draft, "since": SINCE})
        data = body.json()
        assert data["counts"] == {"ask->allow": 3}
        assert data["uncertain"] == 2

    def test_it_lets_viewers_run_it_and_keeps_other_teams_out(
        self, api_as: Any, bob: Any, mallory: Any, record: Any
    ) -> None:
        record("npm run test")
        draft = {"add": [allow("Bash(npm run test:*)")], "since": SINCE}
        assert api_as(bob).post(URL, draft).json()["counts"] == {"ask->allow": 1}
        outsider = api_as(mallory)
        assert outsider.post(URL, {**draft, "team": "default"}).status_code == 400
        assert outsider.post(URL, draft).json()["counts"] == {}

    def test_it_refuses_bad_drafts_with_a_clear_400(self, api_as: Any, alice: Any, mallory: Any) -> None:
        foreign = services.rule_create(rule="Bash(ls)", behavior="allow", source="localSettings", team=mallory_team())
        api = api_as(alice)
        bad = [
            {"add": [allow("Bash(")], "since": SINCE},
            {"add": [{"rule": "Bash(ls)", "behavior": "allow", "source": "autopilot"}], "since": SINCE},
            {"remove": [foreign.pk], "since": SINCE},
            {"replace": [{"id": foreign.pk, "behavior": "deny"}], "since": SINCE},
            {"add": [], "since": "yesterday"},
            {"add": []},
            {"add": [], "since": SINCE, "surprise": 1},
            {"add": [allow("Bash(ls)", scope="session")], "since": SINCE},
        ]
        for body in bad:
            response = api.post(URL, body)
            assert response.status_code == 400, (body, response.content)
        assert api.post(f"{URL}?cursor=forged", {"since": SINCE}).status_code == 400
        assert api.post(f"{URL}?limit=0", {"since": SINCE}).status_code == 400
        assert not Decision.objects.exists()


def alice_team() -> Any:
    return services.default_team()


def mallory_team() -> Any:
    from approvals.models import Team

    return Team.objects.get(name="other")


@pytest.mark.django_db
class WhatIfPageTests:
    def test_it_shows_a_drafts_what_if_as_an_escaped_partial(self, alice: Any, record: Any) -> None:
        from django.test import Client

        record("npm run test -- '<script>alert(1)</script>'", human="deny")
        client = Client()
        client.force_login(alice)
        form = {"rule": "Bash(npm run test:*)", "behavior": "allow", "source": "localSettings", "scope": "global"}
        response = client.post("/rules/what-if/", {**form, "team": services.default_team().pk})
        assert response.status_code == 200, response.content
        html = response.content.decode()
        assert "ask-&gt;allow" in html and "Flagged" in html
        assert "<script>" not in html and "&lt;script&gt;" in html
        assert not Rule.objects.exists()

    def test_it_shows_an_edits_what_if_as_a_replacement(self, alice: Any, record: Any) -> None:
        from django.test import Client

        saved = services.rule_create(rule="Bash(curl:*)", behavior="deny", source="localSettings", team=alice_team())
        record("curl https://example.com")
        client = Client()
        client.force_login(alice)
        assert 'name="replace"' in client.get(f"/rules/{saved.pk}/edit/").content.decode()
        form = {"rule": "Bash(curl:*)", "behavior": "ask", "source": "localSettings", "scope": "global"}
        html = client.post("/rules/what-if/", {**form, "team": alice_team().pk, "replace": saved.pk}).content.decode()
        assert "deny-&gt;ask" in html
        assert Rule.objects.get(pk=saved.pk).behavior == "deny"

    def test_it_answers_a_bad_draft_with_its_error(self, alice: Any) -> None:
        from django.test import Client

        client = Client()
        client.force_login(alice)
        form = {"rule": "Bash(", "behavior": "allow", "source": "localSettings", "scope": "global"}
        response = client.post("/rules/what-if/", {**form, "team": services.default_team().pk})
        assert response.status_code == 400
        assert "unbalanced parenthesis" in response.content.decode()


@pytest.mark.django_db
class OneEngineInputTests:
    """Submit, explain and the replay build the engine's input one way, so they agree."""

    def test_it_caps_explains_mode_at_the_agents_registration_as_submit_does(
        self, api_as: Any, alice: Any, record: Any
    ) -> None:
        call = {"tool_name": "Bash", "tool_input": {"command": "make deploy"}, "cwd": "/tmp/proj"}
        explained = api_as(alice).post(
            "/api/v1/rules/explain", {**call, "mode": "bypassPermissions", "agent": "ci-bot"}
        )
        submitted = record("make deploy", permission_mode="bypassPermissions")
        assert explained.json()["behavior"] == submitted.evaluation["behavior"] == "ask"
        without_agent = api_as(alice).post("/api/v1/rules/explain", {**call, "mode": "bypassPermissions"})
        assert without_agent.json()["behavior"] == "allow"

    def test_it_never_lets_a_reported_hook_allow_in_explain(self, api_as: Any, alice: Any, ci_bot: Any) -> None:
        hook = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
        call = {"tool_name": "Bash", "tool_input": {"command": "make deploy"}, "pre_tool_use_hooks": [hook]}
        assert api_as(alice).post("/api/v1/rules/explain", {**call, "agent": "ci-bot"}).json()["behavior"] == "ask"
