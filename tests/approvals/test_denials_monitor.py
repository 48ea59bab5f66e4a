"""The denials monitor's aggregates: what they count, for whom, and that an index answers them."""

from __future__ import annotations

import random
import statistics
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import selectors, services
from approvals.models import INDEXED_RULE_CHARS, Decision, PermissionRequest


def denied(agent: Any, command: str, session: str = "monitor") -> Decision:
    call = {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": session, "cwd": "/tmp/proj"}
    decision = services.request_submit(agent=agent, call=call).decision
    assert decision is not None and decision.behavior == "deny"
    return decision


def a_week_ago() -> Any:
    return timezone.now() - timedelta(days=7)


def longest_rule_argument() -> str:
    """Random CJK characters (3 bytes each, incompressible) filling a rule to its 4,096 limit."""
    rng = random.Random(8)
    return "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(4096 - len("Bash(echo )")))


@pytest.mark.django_db
class DenialsMonitorTests:
    def test_it_counts_denials_by_rules_too_long_for_the_index(
        self, alice: Any, ci_bot: Any, default_team: Any
    ) -> None:
        argument = longest_rule_argument()
        long_rule = services.rule_create(
            rule=f"Bash(echo {argument})", behavior="deny", source="policySettings", team=default_team
        )
        services.rule_create(rule="Bash(rm:*)", behavior="deny", source="projectSettings", team=default_team)
        assert len(long_rule.rule) > INDEXED_RULE_CHARS
        # A rule of 12 kB would not fit a B-tree entry: the denial must still be written.
        assert denied(ci_bot.agent, f"echo {argument}").rule == long_rule.rule
        denied(ci_bot.agent, "rm -rf build")
        denied(ci_bot.agent, "rm -rf dist")

        over_time = selectors.denials_over_time(alice, a_week_ago())
        top = selectors.denials_top(alice, a_week_ago())
        assert sum(n for _, _, n in over_time) == 3
        assert top["rule"] == [("Bash(rm:*)", 2), (long_rule.rule, 1)]
        assert top["tool"] == [("Bash", 3)]
        assert top["agent"] == [("ci-bot", 3)]

    def test_it_shows_a_superuser_every_team_and_mallory_only_hers(
        self, admin: Any, mallory: Any, ci_bot: Any, other_bot: Any, default_team: Any, other_team: Any
    ) -> None:
        for team in (default_team, other_team):
            services.rule_create(rule="Bash(rm:*)", behavior="deny", source="projectSettings", team=team)
        denied(ci_bot.agent, "rm -rf build")
        denied(other_bot.agent, "rm -rf build")
        denied(other_bot.agent, "rm -rf dist")

        assert selectors.denials_top(admin, a_week_ago())["agent"] == [("other-bot", 2), ("ci-bot", 1)]
        assert selectors.denials_top(mallory, a_week_ago())["agent"] == [("other-bot", 2)]
        assert sum(n for _, _, n in selectors.denials_over_time(admin, a_week_ago(), hourly=True)) == 3

    def test_it_interpolates_time_to_decision_percentiles(self, alice: Any, pending: Any) -> None:
        for index in range(4):
            request = pending(session_id=f"p{index}")
            # Asked 1, 2, 3 and 4 s before the answer: distinct latencies by construction (a
            # fast machine answered two of them within the same millisecond).
            PermissionRequest.objects.filter(pk=request.pk).update(
                created_at=F("created_at") - timedelta(seconds=index + 1)
            )
            services.request_decide(request.pk, services.Answer(behavior="allow", surface="web", user=alice))
        services.request_expire(request=pending(session_id="late"))
        latencies = sorted(Decision.objects.filter(reason_type="user").values_list("latency_ms", flat=True))
        assert len(set(latencies)) == 4  # distinct, so a nearest-rank answer would differ

        stats = selectors.human_decision_stats(alice, a_week_ago())
        # PostgreSQL's percentile_cont, and the same interpolation on SQLite.
        assert stats["median_ms"] == pytest.approx(statistics.median(latencies))
        assert stats["p90_ms"] == pytest.approx(statistics.quantiles(latencies, n=10, method="inclusive")[8])
        assert (stats["humans"], stats["timeouts"], stats["timeout_rate"]) == (4, 1, 0.2)

    def test_it_has_no_percentiles_before_anyone_answered(self, alice: Any) -> None:
        stats = selectors.human_decision_stats(alice, a_week_ago())
        assert stats["median_ms"] is None and stats["p90_ms"] is None and stats["timeout_rate"] is None


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
class DenialsMonitorIndexTests:
    def test_it_answers_every_monitor_query_from_an_index_alone(
        self, alice: Any, ci_bot: Any, default_team: Any, pending: Any
    ) -> None:
        assert connection.vendor == "postgresql", "run with DATABASE_URL=postgres://… (marker: postgresql)"
        services.request_decide(pending().pk, services.Answer(behavior="deny", surface="web", user=alice))
        services.rule_create(rule="Bash(rm:*)", behavior="deny", source="projectSettings", team=default_team)
        denied(ci_bot.agent, "rm -rf dist")
        with connection.cursor() as cursor:
            # Pages vacuum marked all-visible are what index-only scans skip the table for;
            # with the table this small, the planner must be kept from reading it whole.
            cursor.execute("VACUUM (ANALYZE) approvals_decision")
            cursor.execute("SET enable_seqscan = off")
            cursor.execute("SET enable_bitmapscan = off")
            try:
                plans = {
                    name: self.plans(query)
                    for name, query in {
                        "over time": lambda: selectors.denials_over_time(alice, a_week_ago()),
                        "top": lambda: selectors.denials_top(alice, a_week_ago()),
                        "humans": lambda: selectors.human_decision_stats(alice, a_week_ago()),
                    }.items()
                }
            finally:
                cursor.execute("RESET enable_seqscan")
                cursor.execute("RESET enable_bitmapscan")
        assert "Index Only Scan using decision_denied_short_rule" in plans["over time"]
        assert "Index Only Scan using decision_denied_short_rule" in plans["top"]
        assert "Index Only Scan using decision_team_asked" in plans["humans"]

    @staticmethod
    def plans(query: Any) -> str:
        with CaptureQueriesContext(connection) as captured:
            query()
        plans = []
        with connection.cursor() as cursor:
            for sql in (q["sql"] for q in captured.captured_queries if "approvals_decision" in q["sql"]):
                cursor.execute(f"EXPLAIN {sql}")
                plans += [row[0] for row in cursor.fetchall()]
        return "\n".join(plans)
