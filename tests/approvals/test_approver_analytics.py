"""Approver analytics: per person time to decision, approval rate and rubber stamps, on both engines."""

from __future__ import annotations

import statistics
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from approvals import services
from approvals.models import Decision, PermissionRequest
from tests.approvals.conftest import ASK_CALL, person_api

SAFE_CALL = {**ASK_CALL, "tool_input": {"command": "npm publish"}}
counter = iter(range(1_000_000))


def decide_after(agent: Any, person: Any, seconds: float, behavior: str, *, destructive: bool) -> Decision:
    """An ask that waited `seconds` for `person` (its creation moved back), then their decision."""
    call = ASK_CALL if destructive else SAFE_CALL
    request = services.request_submit(agent=agent, call={**call, "tool_use_id": f"an{next(counter)}"}).request
    assert bool((request.evaluation or {}).get("destructive_warning")) is destructive
    PermissionRequest.objects.filter(pk=request.pk).update(created_at=timezone.now() - timedelta(seconds=seconds))
    result = services.request_decide(request.pk, services.Answer(behavior=behavior, surface="web", user=person))
    assert result.won
    return Decision.objects.get(request_id=request.pk)


def expected_for(username: str) -> dict[str, Any]:
    """The oracle: Python's inclusive quantiles over the stored latencies (percentile_cont's method)."""
    latencies = sorted(Decision.objects.filter(decided_by=username).values_list("latency_ms", flat=True))
    return {
        "median_ms": round(statistics.median(latencies), 3),
        "p90_ms": round(statistics.quantiles(latencies, n=10, method="inclusive")[8], 3),
    }


@pytest.mark.django_db
class ApproverAnalyticsTests:
    @pytest.fixture
    def decided(self, ci_bot: Any, alice: Any, carol: Any) -> None:
        agent = ci_bot.agent
        # Alice: two rubber stamps on destructive cards, one careful deny, two quick safe allows.
        decide_after(agent, alice, 0.4, "allow", destructive=True)
        decide_after(agent, alice, 1.2, "allow", destructive=True)
        decide_after(agent, alice, 45, "deny", destructive=True)
        decide_after(agent, alice, 3, "allow", destructive=False)
        decide_after(agent, alice, 1, "allow", destructive=False)
        # Carol: slow and careful; her fast one is a deny, not a stamp of approval.
        decide_after(agent, carol, 1.5, "deny", destructive=True)
        decide_after(agent, carol, 30, "allow", destructive=False)
        decide_after(agent, carol, 120, "deny", destructive=False)

    def test_it_answers_per_person_numbers_at_the_api(self, decided: None, bob: Any) -> None:
        response = person_api(bob).call("get", "/api/v1/analytics/approvers")
        assert response.status_code == 200, response.content
        rows = {row["user"]: row for row in response.json()["approvers"]}
        assert set(rows) == {"alice", "carol"}
        alice, carol = rows["alice"], rows["carol"]
        assert (alice["decisions"], alice["allowed"], alice["denied"], alice["approval_rate"]) == (5, 4, 1, 0.8)
        assert (alice["destructive_decisions"], alice["destructive_under_2s"]) == (3, 2)
        assert alice["destructive_allowed_under_2s"] == 2
        assert (carol["decisions"], carol["approval_rate"], carol["destructive_under_2s"]) == (3, 0.3333, 1)
        assert carol["destructive_allowed_under_2s"] == 0
        for name in ("alice", "carol"):
            assert {k: rows[name][k] for k in ("median_ms", "p90_ms")} == expected_for(name)
        # Slowest median first: carol (30 s) before alice (1.2 s).
        assert [row["user"] for row in response.json()["approvers"]] == ["carol", "alice"]
        assert 1_200 <= alice["median_ms"] < 1_700 and 30_000 <= carol["median_ms"] < 30_500

    @pytest.mark.postgresql  # percentile_cont is PostgreSQL's; the SQLite pass checks against Python's quantiles
    def test_it_matches_the_database_own_percentile_on_postgresql(self, decided: None, bob: Any) -> None:
        assert connection.vendor == "postgresql"
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT decided_by, percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms),"
                " percentile_cont(0.9) WITHIN GROUP (ORDER BY latency_ms)"
                " FROM approvals_decision WHERE reason_type = 'user' GROUP BY decided_by"
            )
            database = {name: (round(p50, 3), round(p90, 3)) for name, p50, p90 in cursor.fetchall()}
        rows = person_api(bob).call("get", "/api/v1/analytics/approvers").json()["approvers"]
        assert {row["user"]: (row["median_ms"], row["p90_ms"]) for row in rows} == database

    def test_it_counts_only_the_window_and_the_callers_teams(
        self, decided: None, mallory: Any, other_bot: Any, bob: Any
    ) -> None:
        decide_after(other_bot.agent, mallory, 2, "allow", destructive=False)
        assert [
            r["user"] for r in person_api(mallory).call("get", "/api/v1/analytics/approvers").json()["approvers"]
        ] == ["mallory"]
        later = (timezone.now() + timedelta(hours=1)).isoformat().replace("+", "%2B")
        response = person_api(bob).call("get", f"/api/v1/analytics/approvers?since={later}")
        assert response.status_code == 400  # since after the default until (now)
        until = (timezone.now() - timedelta(days=1)).isoformat().replace("+", "%2B")
        response = person_api(bob).call("get", f"/api/v1/analytics/approvers?until={until}")
        assert response.status_code == 200 and response.json()["approvers"] == []

    def test_it_refuses_a_team_the_caller_is_not_in_and_bad_dates(self, decided: None, mallory: Any) -> None:
        api = person_api(mallory)
        assert api.call("get", "/api/v1/analytics/approvers?team=default").status_code == 404
        bad = api.call("get", "/api/v1/analytics/approvers?since=yesterday")
        assert bad.status_code == 400 and "since" in bad.json()["error"]["message"]

    def test_it_shows_the_table_on_the_denials_monitor(self, decided: None, bob: Any) -> None:
        client = Client()
        client.force_login(bob)
        html = client.get("/denials/").content.decode()
        assert 'id="approvers"' in html
        table = html[html.index('id="approvers"') :]
        assert table.index(">carol<") < table.index(">alice<")
        assert 'data-rubber-stamps="2"' in table
