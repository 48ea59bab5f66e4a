"""An auto-decided submit does only the database work it needs."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import services
from approvals.audit import verify_row
from approvals.models import AuditSearch, Decision, PermissionRequest, SessionDenials
from tests.round_trips import protocol_if_postgresql

CALL = {"tool_name": "Bash", "tool_input": {"command": "git status"}, "session_id": "s1", "cwd": "/srv/app"}


def _submit(agent: Any, tool_use_id: str, **extra: Any) -> tuple[Any, list[str]]:
    result, queries, _ = _submit_trips(agent, tool_use_id, **extra)
    return result, queries


def _submit_trips(agent: Any, tool_use_id: str, **extra: Any) -> tuple[Any, list[str], list[list[str]]]:
    """The submit's result, its statements as Django ran them, and as PostgreSQL got them: one list per round trip."""
    with CaptureQueriesContext(connection) as captured, protocol_if_postgresql() as trips:
        result = services.request_submit(agent=agent, call={**CALL, "tool_use_id": tool_use_id, **extra})
    return result, [query["sql"] for query in captured.captured_queries], trips


# Transactional: inside the test's own transaction every atomic block would be a savepoint.
@pytest.mark.django_db(transaction=True)
class SubmitStatementTests:
    @pytest.fixture(autouse=True)
    def allow_git_status(self, default_team: Any) -> None:
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=default_team)

    def test_it_writes_the_denial_state_only_when_it_changes(self, ci_bot: Any) -> None:
        _submit(ci_bot.agent, "toolu_1")
        saved = SessionDenials.objects.get(agent=ci_bot.agent, session_id="s1")
        result, queries = _submit(ci_bot.agent, "toolu_2")
        assert result.decision.behavior == "allow"
        assert not [q for q in queries if "sessiondenials" in q.lower() and not q.lstrip().startswith("SELECT")]
        assert SessionDenials.objects.get(pk=saved.pk).updated_at == saved.updated_at
        # A deny changes the streak, so it is saved.
        denied, _ = _submit(ci_bot.agent, "toolu_3", tool_input={"command": "rm -rf /"}, permission_mode="dontAsk")
        assert denied.decision.behavior == "deny"
        assert SessionDenials.objects.get(pk=saved.pk).state != saved.state

    def test_it_neither_reads_nor_writes_denial_state_without_a_session(self, ci_bot: Any) -> None:
        _, queries = _submit(ci_bot.agent, "toolu_1", session_id="")
        assert not [q for q in queries if "sessiondenials" in q.lower()]
        assert not SessionDenials.objects.exists()

    def test_it_reads_no_rules_while_they_are_unchanged_and_takes_no_savepoint(self, ci_bot: Any) -> None:
        _submit(ci_bot.agent, "toolu_1")
        _, queries, trips = _submit_trips(ci_bot.agent, "toolu_2")
        assert not [q for q in queries if 'from "approvals_rule"' in q.lower()]
        assert not [q for q in queries if "savepoint" in q.lower()]
        # Nor the team's webhooks: they are kept per rules version too (relay.webhooks).
        assert not [q for q in queries if "relay_webhook" in q.lower()]
        # One read for the replay check, denial state, stop switch, rules version and the
        # team's approval settings (selectors.submit_context); then the audit row (its hash
        # computed from the chain's head), its search text (approvals.audit_search) and the
        # request, inserted naming its outcome row, which PostgreSQL gets in one round trip
        # with the chain's advisory lock.
        expected = 5 if connection.vendor == "postgresql" else 4
        assert len([q for q in queries if q not in ("BEGIN", "BEGIN IMMEDIATE", "COMMIT")]) == expected, queries
        if connection.vendor == "postgresql":
            assert len(trips) == 2, trips
        (context,) = [q for q in queries if "approvals_teamsettings" in q]
        for table in ("approvals_permissionrequest", "approvals_sessiondenials", "approvals_pause", "rulesversion"):
            assert table in context
            reads = [q for q in queries if table in q and q.lstrip().startswith("SELECT")]
            # On PostgreSQL the writes under the chain's lock go in the lock's message.
            assert len([q for q in reads if "pg_advisory_xact_lock" not in q]) == 1, queries

    def test_an_ask_counts_the_agents_pending_asks_in_the_context_read(self, ci_bot: Any) -> None:
        result, queries = _submit(ci_bot.agent, "toolu_ask", tool_input={"command": "npm publish"})
        assert result.decision is None  # an ask: the pending cap was checked
        counts = [q for q in queries if "count(" in q.lower()]
        assert len(counts) == 1 and "approvals_teamsettings" in counts[0], queries

    def test_the_chain_lock_is_held_for_one_message(self, ci_bot: Any) -> None:
        _submit(ci_bot.agent, "toolu_1")
        result, queries, trips = _submit_trips(ci_bot.agent, "toolu_2")
        if connection.vendor == "postgresql":
            # The lock, the audit row (its hash computed by the database from the head it
            # reads), its search text and the request naming it in one round trip, which
            # is the whole transaction: its BEGIN and COMMIT in it.
            locked = next(i for i, trip in enumerate(trips) if "pg_advisory_xact_lock" in "".join(trip))
            assert locked == len(trips) - 1 and len(trips[locked]) == 6, trips
            assert trips[locked][0] == "BEGIN" and trips[locked][-1] == "COMMIT", trips
            under_lock = "; ".join(trips[locked])
            assert not [q for q in queries if q.startswith(("BEGIN", "COMMIT"))], queries
            for part in ("approvals_decision", "gatehouse_chain_hash", "approvals_auditsearch"):
                assert part in under_lock
            # The request is inserted there, naming the row: never inserted, then updated.
            assert 'INSERT INTO "approvals_permissionrequest"' in under_lock
            assert not [q for q in queries if "UPDATE" in q], queries
        else:  # SQLite holds its one write lock from BEGIN, and has no round trips to save
            row = next(i for i, q in enumerate(queries) if "gatehouse_chain_hash" in q)
            assert len(queries[row:]) == 4 and queries[-1] == "COMMIT", queries[row:]
            assert 'INSERT INTO "approvals_permissionrequest"' in queries[row + 2]
            assert not [q for q in queries if "UPDATE" in q], queries
        stored = PermissionRequest.objects.get(pk=result.request.pk)
        assert stored.decision_id == result.decision.pk
        assert "git status" in AuditSearch.objects.get(decision_id=result.decision.pk).text
        assert result.decision.hash == Decision.objects.get(pk=result.decision.pk).hash
        assert verify_row(Decision.objects.select_related("request__agent").get(pk=result.decision.pk))
