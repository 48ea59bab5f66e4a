"""A request's timeline: asked, notified, claimed, decided, ran — what the database recorded."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from approvals import selectors, services


def ask(agent: Any, command: str = "make deploy") -> Any:
    call = {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": "s1", "cwd": "/tmp/proj"}
    result = services.request_submit(agent=agent, call=call)
    return result


def steps(html: str) -> list[tuple[str, str]]:
    timeline = re.search(r'<ol class="timeline".*?</ol>', html, re.S)
    assert timeline, "the page shows the timeline"
    found = re.findall(
        r'<span class="tl-step">(\w+)</span>.*?<span class="tl-detail">([^<]*)</span>', timeline.group(), re.S
    )
    return [(step, detail) for step, detail in found]


def page(user: Any, path: str) -> str:
    client = Client()
    client.force_login(user)
    return client.get(path).content.decode()


@pytest.mark.django_db
class TimelineTests:
    def test_it_shows_asked_claimed_decided_and_ran_for_an_allowed_call(self, alice: Any, ci_bot: Any) -> None:
        from relay.models import SurfaceMessage

        req = ask(ci_bot.agent).request
        SurfaceMessage.objects.create(request=req, surface="telegram", channel="42", message_id="7")
        decision = services.request_decide(
            req.pk, services.Answer(behavior="allow", surface="web", user=alice)
        ).decision
        assert decision is not None
        assert services.request_record_result(request=req, ok=True, output="done")
        html = page(alice, f"/audit/{decision.pk}/")
        assert steps(html) == [
            ("asked", "by ci-bot"),
            ("notified", "telegram message"),
            ("claimed", "alice via web"),
            ("decided", "allow by alice via web"),
            ("ran", "succeeded"),
        ]
        timeline = re.search(r'<ol class="timeline".*?</ol>', html, re.S)
        assert timeline and len(re.findall(r'<time class="local"', timeline.group())) == 5
        assert re.search(r"\(\+\d+ ms\)", timeline.group()), "each later step says how long after the ask"

    def test_it_shows_the_autopilot_saving_a_rule_after_the_allow_that_earned_it(self, alice: Any, ci_bot: Any) -> None:
        from approvals.models import AuditKind, Decision

        services.autopilot_configure(team=services.default_team(), enabled=True, approvals=2, trial_hours=48)
        for session in ("s1", "s2"):
            call = {"tool_name": "Bash", "tool_input": {"command": "make docs"}, "session_id": session, "cwd": "/p"}
            req = services.request_submit(agent=ci_bot.agent, call=call).request
            decided = services.request_decide(req.pk, services.Answer(behavior="allow", surface="web", user=alice))
        assert decided.decision is not None
        [promotion] = Decision.objects.filter(kind=AuditKind.AUTOPILOT, request_id=req.pk)
        for row in (decided.decision, promotion):  # the decision's page and the promotion's
            assert steps(page(alice, f"/audit/{row.pk}/"))[-3:] == [
                ("decided", "allow by alice via web"),
                ("autopilot", "saved Bash(make docs:*) for a 2-day trial"),
                ("ran", "no result reported (the agent reports one after the call runs)"),
            ]

    def test_it_says_a_denied_call_did_not_run_and_a_rule_decision_had_no_claim(
        self, alice: Any, ci_bot: Any, default_team: Any
    ) -> None:
        services.rule_create(rule="Bash(rm:*)", behavior="deny", source="projectSettings", team=default_team)
        decision = ask(ci_bot.agent, "rm -rf build").decision
        assert steps(page(alice, f"/audit/{decision.pk}/")) == [
            ("asked", "by ci-bot"),
            ("decided", "deny by rule Bash(rm:*) via engine"),
            ("ran", "did not run: denied"),
        ]

    def test_it_says_when_an_allowed_call_reported_no_result_and_a_failure(self, alice: Any, ci_bot: Any) -> None:
        first, second = ask(ci_bot.agent, "make a").request, ask(ci_bot.agent, "make b").request
        for req in (first, second):
            services.request_decide(req.pk, services.Answer(behavior="allow", surface="web", user=alice))
        assert services.request_record_result(request=second, ok=False, error="exit 2")
        fresh = selectors.request_get(first.pk)
        assert fresh is not None
        first_steps = selectors.request_timeline(fresh, selectors.decision_for(fresh))
        assert first_steps[-1] == {
            "step": "ran",
            "at": None,
            "detail": "no result reported (the agent reports one after the call runs)",
        }
        assert steps(page(alice, f"/requests/{second.pk}/"))[-1] == ("ran", "failed")

    def test_it_shows_a_pending_request_waiting(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent).request
        assert steps(page(alice, f"/requests/{req.pk}/")) == [
            ("asked", "by ci-bot"),
            ("waiting", "no one has answered yet"),
        ]
