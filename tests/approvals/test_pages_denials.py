"""The denials monitor: aggregates and server-drawn SVG charts."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from approvals import services


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def submit(agent: Any, command: str, session: str = "loop") -> Any:
    call = {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": session, "cwd": "/tmp/proj"}
    return services.request_submit(agent=agent, call=call)


@pytest.mark.django_db
class DenialsPageTests:
    def test_it_counts_denials_and_draws_them_by_tool_agent_rule_and_decider(
        self, alice: Any, ci_bot: Any, default_team: Any
    ) -> None:
        services.rule_create(rule="Bash(rm:*)", behavior="deny", source="projectSettings", team=default_team)
        for _ in range(2):
            assert submit(ci_bot.agent, "rm -rf build").decision.behavior == "deny"
        asked = submit(ci_bot.agent, "make deploy", session="other").request
        services.request_decide(asked.pk, services.Answer(behavior="deny", surface="web", user=alice))
        html = client_for(alice).get("/denials/?days=7").content.decode()
        assert '<span class="num" id="stat-denials">3</span>' in html
        assert html.count('<svg class="chart') == 5
        assert "Bash(rm:*)" in html and ">ci-bot<" in html and ">alice<" in html

    def test_it_reports_time_to_decision_and_timeout_rate(self, alice: Any, ci_bot: Any) -> None:
        first = submit(ci_bot.agent, "make a", session="t1").request
        second = submit(ci_bot.agent, "make b", session="t2").request
        services.request_decide(first.pk, services.Answer(behavior="allow", surface="web", user=alice))
        services.request_expire(request=second)
        html = client_for(alice).get("/denials/").content.decode()
        assert '<span class="num" id="stat-timeout-rate">50%</span>' in html
        assert "(1 of 2)" in html

    def test_it_lists_a_session_stuck_in_a_denial_loop(self, alice: Any, ci_bot: Any, default_team: Any) -> None:
        services.rule_create(rule="Bash(rm:*)", behavior="deny", source="projectSettings", team=default_team)
        for _ in range(3):
            submit(ci_bot.agent, "rm -rf build", session="stuck-session")
        html = client_for(alice).get("/denials/").content.decode()
        assert 'id="loops"' in html and "stuck-session" in html

    def test_it_escapes_agent_supplied_labels_in_charts(self, alice: Any, ci_bot: Any) -> None:
        call = {"tool_name": "mcp__evil__<script>x</script>", "tool_input": {}, "session_id": "x"}
        result = services.request_submit(agent=ci_bot.agent, call=call)
        if result.decision is None:
            services.request_decide(result.request.pk, services.Answer(behavior="deny", surface="web", user=alice))
        html = client_for(alice).get("/denials/").content.decode()
        assert "<script>x</script>" not in html

    def test_it_shows_mallory_none_of_another_teams_denials(self, alice: Any, mallory: Any, ci_bot: Any) -> None:
        asked = submit(ci_bot.agent, "make deploy").request
        services.request_decide(asked.pk, services.Answer(behavior="deny", surface="web", user=alice))
        html = client_for(mallory).get("/denials/").content.decode()
        assert '<span class="num" id="stat-denials">0</span>' in html


@pytest.mark.django_db
class DenialsOverTimeByCauseTests:
    def test_it_stacks_each_day_by_cause_and_links_each_piece_to_its_audit_query(
        self, alice: Any, ci_bot: Any, default_team: Any
    ) -> None:
        import re
        from html import unescape
        from urllib.parse import parse_qs, urlsplit

        services.rule_create(rule="Bash(rm:*)", behavior="deny", source="projectSettings", team=default_team)
        for _ in range(2):
            submit(ci_bot.agent, "rm -rf build")
        asked = submit(ci_bot.agent, "make deploy", session="other").request
        services.request_decide(asked.pk, services.Answer(behavior="deny", surface="web", user=alice))
        html = client_for(alice).get("/denials/?days=7").content.decode()
        chart = re.search(r'<svg class="chart chart-time".*?</svg>', html, re.S)
        assert chart
        pieces = re.findall(
            r'<a href="([^"]+)"><title>[^<]*: (\d+) denials, in the audit log</title>'
            r'<rect class="chart-col cause-([a-z-]+)"',
            chart.group(),
        )
        assert sorted((cause, n) for _, n, cause in pieces) == [("person", "1"), ("rule", "2")]
        for href, _, cause in pieces:
            query = parse_qs(urlsplit(unescape(href)).query)
            assert query["reason_type"] == [{"rule": "rule", "person": "user"}[cause]]
            assert query["behavior"] == ["deny"]
            for moment in (query["since"][0], query["until"][0]):
                assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", moment), moment
            rows = client_for(alice).get(unescape(href)).content.decode()
            assert rows.count('<tr>\n      <td><a href="/audit/') == {"rule": 2, "person": 1}[cause]
        assert 'class="legend"' in html and "safety check" in html
