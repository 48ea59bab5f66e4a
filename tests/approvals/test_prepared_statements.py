"""`run_together` on PostgreSQL: the reads every call makes are kept prepared once a
connection has run them a few times, and a prepared statement answers as the ORM does,
whatever text its parameters carry."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals import selectors, services
from approvals.audit import verify_chain
from approvals.models import Decision, PermissionRequest, SessionDenials
from approvals.written import run_together
from gatehouse.postgresql import batch
from tests.round_trips import protocol

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

THRESHOLD = 5  # settings: DB_PREPARED

# Text a parameter may carry: quotes, backslashes, placeholders of both styles, SQL,
# comments, non-ASCII, control characters; PostgreSQL's text holds anything but NUL.
TEXT = st.lists(
    st.one_of(
        st.sampled_from(["'", '"', "\\", "%s", "%%", "$1", "?", ";", "--", "/*", "*/", "E'", "\n", "\t"]),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00", exclude_categories=["Cs"]), max_size=4),
    ),
    max_size=10,
).map("".join)


def prepared() -> list[tuple[str, int]]:
    """This connection's prepared statements: their text, and how often each ran prepared."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        return list(cursor.fetchall())


def prepared_names() -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, statement FROM pg_prepared_statements")
        return list(cursor.fetchall())


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def prepared_reading(marker: str) -> list[int]:
    return [runs for statement, runs in prepared() if marker in statement]


@pytest.fixture
def vendor() -> Iterator[None]:
    assert connection.vendor == "postgresql", "run with DATABASE_URL=postgres://… (marker: postgresql)"
    assert connection.settings_dict["OPTIONS"]["prepare_threshold"] == THRESHOLD
    # Each test counts from a connection that has prepared nothing: the suite's
    # connections outlive a test, and what they keep prepared with them.
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    batch.forget(connection.connection)
    yield


@pytest.mark.usefixtures("vendor")
class PreparedReadTests:
    def test_the_tokens_read_is_prepared_after_the_threshold_and_answers_the_same(self, ci_bot: Any) -> None:
        digest = services.token_hash(ci_bot.token)
        for _ in range(THRESHOLD):
            assert selectors.agent_by_token_hash(digest)[0] == ci_bot.agent
        assert prepared_reading('"token_hash" = $1') == []
        for _ in range(2):
            found, _ = selectors.agent_by_token_hash(digest)
            assert found == ci_bot.agent
            assert found is not None and found.team.name == ci_bot.agent.team.name
        # Run THRESHOLD times, it is prepared on the next run, which runs it prepared.
        assert prepared_reading('"token_hash" = $1') == [2]
        assert selectors.agent_by_token_hash(services.token_hash("gha_unknown"))[0] is None

    def test_a_submits_context_is_prepared_and_reads_what_the_orm_reads(self, ci_bot: Any) -> None:
        agent = ci_bot.agent
        SessionDenials.objects.create(agent=agent, session_id="s1", state={"consecutive": 2, "total": 3})
        for n in range(THRESHOLD + 2):
            context = selectors.submit_context(agent=agent, tool_use_id=f"toolu_{n}", session_id="s1", pending_limit=10)
            assert context.denial_state == {"consecutive": 2, "total": 3}
            assert not context.replayed
        assert prepared_reading("approvals_sessiondenials WHERE agent_id = gh_me.id") == [2]

    @pytest.mark.parametrize("by_token", [False, True], ids=["by the agent", "with the agent's token"])
    def test_the_prepared_context_reads_only_the_rows_it_answers_with(self, ci_bot: Any, by_token: bool) -> None:
        """A generic plan is made from the statistics of the moment, and kept: made on tables
        the planner knew nothing of (never analyzed), the replay check took the agent's own
        index and read every request of the agent (migration 0029). The same for the
        context read with the agent's token (`services.context_reads_ahead`)."""
        agent = ci_bot.agent
        for n in range(150):
            services.request_submit(
                agent=agent,
                call={"tool_name": "Read", "tool_input": {"file_path": f"/srv/app/{n}"}, "tool_use_id": f"toolu_{n}"},
            )
        who: dict[str, Any] = {"token_digest": services.token_hash(ci_bot.token)} if by_token else {"agent": agent}
        sql, params = selectors.submit_context_statement(
            tool_use_id="toolu_new", session_id="s1", pending_limit=10, **who
        )
        for _ in range(THRESHOLD + 2):
            assert run_together([(sql, params)])[0][0][-5:] == (agent.pk, agent.team_id, "toolu_new", "s1", 10)
        [name] = [
            name
            for name, statement in prepared_names()
            if "approvals_sessiondenials WHERE" in statement and ("token_hash" in statement) == by_token
        ]
        with connection.cursor() as cursor:
            cursor.execute("SET plan_cache_mode = force_generic_plan")
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}({', '.join(['%s'] * len(params))})", params)
            [[plan]] = cursor.fetchall()
            cursor.execute("RESET plan_cache_mode")
        nodes = list(plan_nodes(plan[0]["Plan"]))
        assert [node for node in nodes if node.get("Rows Removed by Filter")] == []
        assert not [node for node in nodes if node["Node Type"] == "Seq Scan"]

    def test_without_a_threshold_nothing_is_prepared(self, ci_bot: Any) -> None:
        options = {**connection.settings_dict["OPTIONS"], "prepare_threshold": None}
        options.pop("pool", None)
        wrapper: Any = type(connections[DEFAULT_DB_ALIAS])(
            {**connection.settings_dict, "OPTIONS": options, "CONN_MAX_AGE": 0}, alias="unprepared"
        )
        try:
            for _ in range(THRESHOLD * 2):
                rows = wrapper.run_pipeline([("SELECT name FROM approvals_agent WHERE id = %s", [ci_bot.agent.pk])])
                assert rows == [[(ci_bot.agent.name,)]]
            with wrapper.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_prepared_statements")
                assert cursor.fetchone() == (0,)
        finally:
            wrapper.close()

    # The agent is shared by the examples on purpose: each compares with what the ORM
    # reads at that moment, and the rows earlier examples left make the later ones richer.
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(session_id=TEXT, tool_use_id=TEXT, stored=st.booleans())
    def test_prepared_reads_answer_as_the_orm_for_any_text(
        self, ci_bot: Any, session_id: str, tool_use_id: str, stored: bool
    ) -> None:
        agent = ci_bot.agent
        if stored:
            SessionDenials.objects.update_or_create(
                agent=agent, session_id=session_id, defaults={"state": {"consecutive": 1, "total": 1}}
            )
            if not PermissionRequest.objects.filter(agent=agent, tool_use_id=tool_use_id).exists():
                services.request_submit(
                    agent=agent,
                    call={"tool_name": "Read", "tool_input": {"file_path": "/x"}, "tool_use_id": tool_use_id},
                )
        for _ in range(THRESHOLD + 1):  # the last runs prepared
            context = selectors.submit_context(
                agent=agent, tool_use_id=tool_use_id, session_id=session_id, pending_limit=10
            )
        denials = SessionDenials.objects.filter(agent=agent, session_id=session_id).first()
        assert context.denial_state == (denials.state if denials is not None and session_id else None)
        assert context.replayed == PermissionRequest.objects.filter(agent=agent, tool_use_id=tool_use_id).exists()
        assert context.pending == min(PermissionRequest.objects.filter(agent=agent, state="pending").count(), 10)
        # The text as a parameter of a prepared statement comes back unchanged.
        for _ in range(THRESHOLD + 1):
            [rows] = run_together([("SELECT %s::text, length(%s::text)", [session_id, session_id])])
            assert rows == [(session_id, len(session_id))]
        assert prepared_reading("SELECT $1::text, length($2::text)")


ASK = {"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "session_id": "s1", "cwd": "/srv/app"}


@pytest.mark.usefixtures("vendor")
class RunTogetherTests:
    """`run_together`: statements in one round trip, each kept prepared."""

    def test_an_asks_card_read_is_prepared_and_reads_what_the_orm_reads(self, ci_bot: Any, alice: Any) -> None:
        from relay.selectors import requests_for_cards

        ask = services.request_submit(agent=ci_bot.agent, call={**ASK, "tool_use_id": "toolu_card"}).request
        for _ in range(THRESHOLD + 2):
            requests, teams = requests_for_cards([ask.pk], asked=[ask.pk])
        stored = PermissionRequest.objects.select_related("agent", "team").get(pk=ask.pk)
        found = requests[ask.pk]
        assert [getattr(found, f.attname) for f in PermissionRequest._meta.concrete_fields] == [
            getattr(stored, f.attname) for f in PermissionRequest._meta.concrete_fields
        ]
        assert (found.agent.name, found.team.name) == (stored.agent.name, stored.team.name)
        assert teams == {ask.team_id: {alice.pk: "approver"}}
        # The request, the memberships and "since last allowed": each ran prepared twice.
        assert prepared_reading('FROM "approvals_membership" WHERE "team_id" IN') == [2]
        assert prepared_reading('"approvals_permissionrequest" t0') != []
        assert all(runs == 2 for runs in prepared_reading('"approvals_permissionrequest" t0'))

    def test_a_persons_request_and_role_are_prepared(self, ci_bot: Any, alice: Any) -> None:
        ask = services.request_submit(agent=ci_bot.agent, call={**ASK, "tool_use_id": "toolu_role"}).request
        for _ in range(THRESHOLD + 2):
            found, members = selectors.request_and_members(ask.pk)
            assert found == ask and members == {alice.pk: "approver"}
        assert selectors.request_and_members(uuid.uuid4()) == (None, {})
        assert prepared_reading('"approvals_membership" WHERE "team_id" = (SELECT') != []

    def test_a_persons_decision_is_written_prepared(self, ci_bot: Any, alice: Any) -> None:
        """The fence, the chain's lock, the audit row, its search text and the request naming it."""
        for n in range(THRESHOLD + 2):
            ask = services.request_submit(agent=ci_bot.agent, call={**ASK, "tool_use_id": f"toolu_d{n}"}).request
            answer = services.Answer(behavior="deny", surface="api", user=alice, message="no")
            result = services.request_decide(ask.pk, answer, loaded=ask)
            assert result.won and result.decision is not None
            assert Decision.objects.get(pk=result.decision.pk).hash == result.decision.hash
        assert prepared_reading("gatehouse_fence_held") == [2]
        assert prepared_reading("pg_advisory_xact_lock") != []
        assert prepared_reading('INSERT INTO "approvals_auditsearch"') != []
        assert [runs for runs in prepared_reading('INSERT INTO "approvals_decision"') if runs] != []
        assert not list(verify_chain())

    def test_a_lost_fence_prepared_leaves_nothing_written_and_the_connection_goes_on(
        self, ci_bot: Any, alice: Any
    ) -> None:
        """An error mid-batch: the statements after it are skipped and the one transaction
        rolls back. The connection goes on deciding, its statements still prepared: a
        name is kept once the server has answered its Parse, and a statement failing in
        a later batch does not unmake it (`gatehouse.postgresql.batch`)."""
        answer = services.Answer(behavior="allow", surface="api", user=alice)
        for n in range(THRESHOLD + 2):
            ask = services.request_submit(agent=ci_bot.agent, call={**ASK, "tool_use_id": f"toolu_l{n}"}).request
            assert services.request_decide(ask.pk, answer, loaded=ask).won
            rows = Decision.objects.count()
            lost = services.request_decide(ask.pk, answer, loaded=ask)  # its own fence: the row moved
            assert not lost.won and Decision.objects.count() == rows
        for n in range(THRESHOLD + 2):  # prepared again after the threshold
            ask = services.request_submit(agent=ci_bot.agent, call={**ASK, "tool_use_id": f"toolu_a{n}"}).request
            assert services.request_decide(ask.pk, answer, loaded=ask).won
        # Every run but the first THRESHOLD, the lost ones too, ran prepared.
        assert prepared_reading("gatehouse_fence_held") == [3 * (THRESHOLD + 2) - THRESHOLD]
        assert [runs for runs in prepared_reading('INSERT INTO "approvals_decision"') if runs] != []
        assert not list(verify_chain())

    def test_statements_together_are_one_transaction(self) -> None:
        from django.db import DataError

        with connection.cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE together (n int)")
        with pytest.raises(DataError):
            run_together([("INSERT INTO together VALUES (%s)", [1]), ("SELECT 1 / %s::int", [0])])
        assert run_together([("SELECT count(*) FROM together", [])]) == [[(0,)]]
        with protocol() as trips:
            run_together([("INSERT INTO together VALUES (%s)", [2]), ("SELECT n FROM together", [])])
        # One round trip: its BEGIN and COMMIT in it, one Sync at its end.
        assert trips == [["BEGIN", "INSERT INTO together VALUES ($1)", "SELECT n FROM together", "COMMIT"]]
        assert run_together([("SELECT n FROM together", [])]) == [[(2,)]]

    @pytest.mark.parametrize("unsendable", ["a\x00b", object()])
    def test_a_statement_that_cannot_be_sent_commits_none_of_those_sent_before_it(self, unsendable: Any) -> None:
        """A parameter that cannot be sent fails as its statement is queued, before the
        batch sends anything: the insert queued before it is never sent, never committed."""
        with connection.cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE unsent (n int)")
        for runs in range(THRESHOLD + 2):  # on every run of the threshold's count
            with pytest.raises(Exception) as raised:
                run_together([("INSERT INTO unsent VALUES (%s)", [runs]), ("SELECT %s::text", [unsendable])])
            assert not isinstance(raised.value, AssertionError)
            assert run_together([("SELECT count(*) FROM unsent", [])]) == [[(0,)]]
        run_together([("INSERT INTO unsent VALUES (%s)", [7]), ("SELECT %s::text", ["sent"])])
        assert run_together([("SELECT n FROM unsent", [])]) == [[(7,)]]
        assert connection.connection.info.transaction_status.name == "IDLE"

    @pytest.mark.parametrize("failing", [0, 1, 2])
    @pytest.mark.parametrize("runs_before", range(THRESHOLD + 3))
    def test_a_pipeline_failing_anywhere_at_any_run_leaves_its_statements_runnable(
        self, failing: int, runs_before: int
    ) -> None:
        """Whichever statement fails, on whichever run of the threshold's count: the ones it
        skips may have been on the run psycopg prepares them."""
        from django.db import DataError

        good = [("SELECT %s::int + 1", ["1"]), ("SELECT %s::int + 2", ["1"]), ("SELECT %s::int + 3", ["1"])]
        for _ in range(runs_before):
            assert run_together(good) == [[(2,)], [(3,)], [(4,)]]
        bad = [(sql, ["not a number"] if n == failing else params) for n, (sql, params) in enumerate(good)]
        with pytest.raises(DataError):
            run_together(bad)
        for _ in range(THRESHOLD + 2):
            assert run_together(good) == [[(2,)], [(3,)], [(4,)]]
        # Each is prepared once, under one name, and its last runs ran prepared.
        assert len(prepared_reading("::int + ")) == 3
        assert min(prepared_reading("::int + ")) >= 2

    @pytest.mark.parametrize("runs_before", range(THRESHOLD + 3))
    def test_a_pipeline_failing_in_a_transaction_leaves_its_statements_runnable_after_the_savepoint(
        self, runs_before: int
    ) -> None:
        """Inside a caller's transaction the pipeline has no BEGIN and COMMIT of its own:
        the caller's rollback, here to a savepoint, is what ends the failure."""
        from django.db import DataError, transaction

        good = [("SELECT %s::int + 1", ["1"]), ("SELECT %s::int + 2", ["1"])]
        bad = [("SELECT %s::int + 1", ["not a number"]), ("SELECT %s::int + 2", ["1"])]
        with transaction.atomic():
            for _ in range(runs_before):
                assert run_together(good) == [[(2,)], [(3,)]]
            with pytest.raises(DataError), transaction.atomic():
                run_together(bad)
            for _ in range(THRESHOLD + 2):
                assert run_together(good) == [[(2,)], [(3,)]]

    def test_a_failing_read_raises_djangos_error_and_the_connection_goes_on(self) -> None:
        from django.db import DataError

        with pytest.raises(DataError):
            run_together([("SELECT %s::int", [1]), ("SELECT 1 / %s::int", [0]), ("SELECT %s::int", [3])])
        assert run_together([("SELECT %s::int", [1]), ("SELECT %s::int", [2])]) == [[(1,)], [(2,)]]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(first=TEXT, second=TEXT)
    def test_statements_together_answer_as_each_alone_for_any_text(self, first: str, second: str) -> None:
        statements = [("SELECT %s::text, length(%s::text)", [first, first]), ("SELECT %s::text", [second])]
        alone = []
        for sql, params in statements:
            with connection.cursor() as cursor:  # Django's own: bound client-side, never prepared
                cursor.execute(sql, params)
                alone.append(cursor.fetchall())
        assert alone == [[(first, len(first))], [(second,)]]
        for _ in range(THRESHOLD + 1):  # the last runs prepared
            assert run_together(statements) == alone
