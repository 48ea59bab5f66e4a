"""A person's decision does only the database work it needs, and its fence still decides alone."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import services
from approvals.audit import verify_chain, verify_row
from approvals.models import AuditSearch, Decision, PermissionRequest, RequestState, Rule, RuleSource
from tests.round_trips import protocol_if_postgresql, round_trips


def _decide(request: Any, behavior: str = "allow", **answer: Any) -> tuple[Any, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        result = services.request_decide(
            request.pk, services.Answer(behavior=behavior, surface="api", decided_by="alice", **answer), loaded=request
        )
    return result, [query["sql"] for query in captured.captured_queries]


def _chain_intact() -> bool:
    return not list(verify_chain())


# Transactional: inside the test's own transaction every atomic block would be a savepoint.
@pytest.mark.django_db(transaction=True)
class DecideStatementTests:
    def test_the_fence_goes_in_the_audit_rows_message(self, pending: Any) -> None:
        request = pending()
        with round_trips() as trips, protocol_if_postgresql() as sent:
            result, queries = _decide(request)
        assert result.won and result.decision.behavior == "allow"
        writes = [q for q in queries if q.startswith(("UPDATE", "WITH", "SELECT pg_advisory", "INSERT", "BEGIN"))]
        if connection.vendor == "postgresql":
            # The fence, the chain's lock, the row, its search text and the request naming
            # it: one round trip, the whole transaction (its BEGIN and COMMIT in it).
            kinds = ("UPDATE", "WITH", "SELECT pg_advisory", "INSERT")
            written = [trip for trip in trips if any(sql.startswith(kinds) for sql in trip)]
            assert len(written) == 1 and len(written[0]) == len(writes) == 5, trips
            [round_trip] = [trip for trip in sent if "gatehouse_fence_held" in "".join(trip)]
            assert round_trip[0] == "BEGIN" and round_trip[-1] == "COMMIT" and len(round_trip) == 7, sent
            message = "; ".join(written[0])
            assert message.startswith("WITH fenced AS (UPDATE") and "gatehouse_fence_held" in message
            assert message.index("gatehouse_fence_held") < message.index("pg_advisory_xact_lock")
            assert message.index("pg_advisory_xact_lock") < message.index('INSERT INTO "approvals_decision"')
            assert not [q for q in queries if q.startswith(("BEGIN", "COMMIT"))], queries
        else:  # SQLite: the fence on its own, in an atomic block that holds the write lock
            assert writes[0].startswith("BEGIN") and "COMMIT" in queries, queries
            assert writes[1].startswith('UPDATE "approvals_permissionrequest"'), writes
            assert queries.index(writes[-1]) < queries.index("COMMIT"), queries
            assert "gatehouse_fence_held" not in "".join(queries)
        stored = PermissionRequest.objects.get(pk=request.pk)
        moved = (RequestState.DECIDED, request.version + 1, result.decision.pk)
        assert (stored.state, stored.version, stored.decision_id) == moved
        assert AuditSearch.objects.filter(decision_id=result.decision.pk).exists()
        assert verify_row(Decision.objects.select_related("request__agent").get(pk=result.decision.pk))

    # What got there first while the decider held a pending copy: every other ending.
    @pytest.mark.parametrize("first", ["allowed", "denied", "cancelled", "expired", "overdue"])
    def test_a_fence_that_moves_nothing_writes_nothing_and_names_the_outcome(self, pending: Any, first: str) -> None:
        request = pending()
        stale = copy.copy(request)
        if first in ("allowed", "denied"):
            services.request_decide(
                request.pk,
                services.Answer(behavior="allow" if first == "allowed" else "deny", surface="web", decided_by="bob"),
            )
        elif first == "cancelled":
            services.request_cancel(request=request, reason="answered locally")
        elif first == "expired":
            services.request_expire(request=request)
        else:  # still pending, but its deadline has passed: the late decision expires it
            PermissionRequest.objects.filter(pk=request.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
        rows_before = Decision.objects.count()
        result, _ = _decide(stale, "allow")
        assert not result.won
        rows = Decision.objects.filter(request_id=request.pk)
        assert rows.count() == 1 and Decision.objects.count() == rows_before + (first == "overdue")
        assert result.decision.pk == rows.get().pk
        expected = {
            "allowed": ("allow", "bob"),
            "denied": ("deny", "bob"),
            "cancelled": ("deny", "agent ci-bot"),
            "expired": ("deny", "timeout"),
            "overdue": ("deny", "timeout"),
        }[first]
        assert (result.decision.behavior, result.decision.decided_by) == expected
        assert PermissionRequest.objects.get(pk=request.pk).version == stale.version + 1  # moved once
        assert _chain_intact()
        assert connection.get_autocommit() and not connection.in_atomic_block
        # The connection is fine for the next decision.
        assert _decide(pending(), "deny")[0].won

    def test_a_remembered_allow_writes_its_rule_in_the_same_transaction(self, pending: Any) -> None:
        request = pending(tool_input={"command": "npm run build"}, session_id="s9")
        result, queries = _decide(request, remember="session")
        assert result.won and result.decision.reason["saved_rule"]
        assert "gatehouse_fence_held" not in "".join(queries)  # a transaction of several statements
        rule = Rule.objects.get(rule=result.decision.reason["saved_rule"])
        assert rule.session_id == request.session_id and _chain_intact()

    def test_a_deny_demotes_the_autopilot_rules_it_finds_in_the_same_transaction(
        self, pending: Any, default_team: Any
    ) -> None:
        request = pending(tool_input={"command": "npm run build"})
        autopilot = {"behavior": "allow", "source": RuleSource.AUTOPILOT, "team": default_team}
        services.rule_create(rule="Bash(npm run build)", **autopilot)
        other = services.rule_create(rule="Bash(ls)", **autopilot)
        result, queries = _decide(request, "deny", reason_type="user")
        assert result.won
        assert result.decision.reason["demoted_autopilot"] == ["Bash(npm run build)"]
        assert list(Rule.objects.filter(source=RuleSource.AUTOPILOT)) == [other]
        assert "gatehouse_fence_held" not in "".join(queries)
        # With nothing left to demote, a person's deny is one message again on PostgreSQL.
        _, queries = _decide(pending(), "deny", reason_type="user")
        assert ("gatehouse_fence_held" in "".join(queries)) == (connection.vendor == "postgresql")
