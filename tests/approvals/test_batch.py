"""`gatehouse.postgresql.batch`: statements queued with libpq and sent in one write keep
what psycopg's cursors did for them: placeholders, a transaction where psycopg would
open one, prepared statements the server really has, a connection that fails closed."""

from __future__ import annotations

import gc
import re
import weakref
from typing import Any

import psycopg
import pytest
from django.db import DEFAULT_DB_ALIAS, OperationalError, ProgrammingError, connection, connections, transaction
from hypothesis import given
from hypothesis import strategies as st

from approvals.written import run_together
from gatehouse.postgresql import batch

THRESHOLD = 5  # settings: DB_PREPARED


@pytest.mark.parametrize(
    ("sql", "numbered"),
    [
        ("SELECT 1", ("SELECT 1", 0)),
        ("SELECT %s", ("SELECT $1", 1)),
        ("SELECT %s, %s::text", ("SELECT $1, $2::text", 2)),
        ("SELECT '%%' || %s", ("SELECT '%' || $1", 1)),
        ("SELECT %%s", ("SELECT %s", 0)),  # an escaped percent sign, then an s
        ("SELECT 1 WHERE x LIKE 'a%%%%'", ("SELECT 1 WHERE x LIKE 'a%%'", 0)),
        ("%s%s", ("$1$2", 2)),
    ],
)
def test_placeholders_are_numbered_as_psycopg_numbers_them(sql: str, numbered: tuple[str, int]) -> None:
    assert batch.numbered(sql) == (numbered[0].encode(), numbered[1])


@pytest.mark.parametrize("sql", ["SELECT %d", "SELECT %(name)s", "SELECT 50%", "SELECT %b", "SELECT %\n"])
def test_a_placeholder_it_does_not_send_is_refused(sql: str) -> None:
    with pytest.raises(psycopg.ProgrammingError):
        batch.numbered(sql)


@given(st.lists(st.sampled_from(["%s", "%%", "a", "'", "$1", " ", "s", "%%s"]), max_size=12).map("".join))
def test_numbering_matches_psycopgs_own_for_any_mix(sql: str) -> None:
    from psycopg._queries import PostgresQuery  # the oracle: how psycopg's cursors convert it

    count = len(re.findall(r"%s", sql.replace("%%", "")))
    query = PostgresQuery(psycopg.adapt.Transformer())
    query.convert(sql, ["x"] * count)
    assert batch.numbered(sql) == (query.query, count)


@pytest.fixture
def fresh() -> Any:
    """A connection that keeps nothing prepared."""
    assert connection.vendor == "postgresql", "run with DATABASE_URL=postgres://… (marker: postgresql)"
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    batch.forget(connection.connection)
    return connection.connection


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements ORDER BY name")
        return [name for (name,) in cursor.fetchall()]


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
class BatchTests:
    def test_in_a_transaction_the_statements_wait_for_its_commit(self, fresh: Any) -> None:
        """psycopg opens a transaction before the first statement outside autocommit; a
        batch bypasses its cursors and opens it itself, in the same write."""
        other = connections.create_connection(DEFAULT_DB_ALIAS)
        try:
            with connection.cursor() as cursor:
                cursor.execute("CREATE TABLE batch_seen (n int)")
            try:

                def seen() -> int:
                    with other.cursor() as cursor:
                        cursor.execute("SELECT count(*) FROM batch_seen")
                        return int(cursor.fetchone()[0])

                with transaction.atomic():
                    run_together([("INSERT INTO batch_seen VALUES (%s)", [1])])
                    run_together([("INSERT INTO batch_seen VALUES (%s)", [2]), ("SELECT %s::int", [3])])
                    assert seen() == 0
                assert seen() == 2
                with pytest.raises(RuntimeError), transaction.atomic():
                    run_together([("INSERT INTO batch_seen VALUES (%s)", [4])])
                    raise RuntimeError
                assert seen() == 2
            finally:
                with connection.cursor() as cursor:
                    cursor.execute("DROP TABLE batch_seen")
        finally:
            other.close()

    @pytest.mark.parametrize("level", [None, *psycopg.IsolationLevel])
    @pytest.mark.parametrize("read_only", [None, True, False])
    @pytest.mark.parametrize("deferrable", [None, True, False])
    def test_the_transaction_it_opens_is_the_one_psycopg_would_open(
        self, fresh: Any, level: Any, read_only: Any, deferrable: Any
    ) -> None:
        raw = psycopg.connect(connection.connection.info.dsn, autocommit=False)
        try:
            raw.isolation_level, raw.read_only, raw.deferrable = level, read_only, deferrable
            assert batch._begin(raw) == raw._get_tx_start_command()  # psycopg's own, the oracle
            context = batch.Context(raw, None)
            statement = batch.convert(context.transformer(), "SELECT current_setting('transaction_isolation')", [])
            [[(isolation,)]] = batch.run(raw, [statement], context.transformer(), THRESHOLD)
            expected = level.name.lower().replace("_", " ") if level is not None else "read committed"
            assert isolation == expected
            assert raw.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            raw.rollback()
        finally:
            raw.close()

    def test_a_name_is_kept_only_once_the_server_has_it(self, fresh: Any) -> None:
        statement = ("SELECT %s::int * 2", [4])
        for _ in range(THRESHOLD):
            assert run_together([statement]) == [[(8,)]]
        assert _prepared() == []
        # The run that would prepare it fails before the Parse: the server skips it.
        with pytest.raises(Exception, match="division by zero"):
            run_together([("SELECT 1 / %s::int", [0]), statement])
        assert _prepared() == []
        assert run_together([statement]) == [[(8,)]]  # prepared now
        assert run_together([statement]) == [[(8,)]]
        assert len(_prepared()) == 1

    def test_a_name_deallocated_under_it_fails_once_then_is_prepared_again(self, fresh: Any) -> None:
        statement = ("SELECT %s::int * 3", [4])
        for _ in range(THRESHOLD + 1):
            assert run_together([statement]) == [[(12,)]]
        assert len(_prepared()) == 1
        with connection.cursor() as cursor:
            cursor.execute("DEALLOCATE ALL")
        with pytest.raises(ProgrammingError, match="does not exist"):
            run_together([statement])
        for _ in range(THRESHOLD + 1):
            assert run_together([statement]) == [[(12,)]]
        assert len(_prepared()) == 1

    def test_a_connection_cut_under_a_batch_is_closed_and_the_next_one_answers(self, fresh: Any) -> None:
        pid = connection.connection.info.backend_pid
        other = connections.create_connection(DEFAULT_DB_ALIAS)
        try:
            with other.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        finally:
            other.close()
        with pytest.raises(OperationalError):
            run_together([("SELECT %s::int", [1]), ("SELECT %s::int", [2])])
        assert connection.connection.closed
        connection.close()
        assert run_together([("SELECT %s::int", [1]), ("SELECT %s::int", [2])]) == [[(1,)], [(2,)]]

    def test_a_connections_adapters_do_not_keep_it_alive(self, fresh: Any) -> None:
        # The wrapper keeps each connection's adapters weakly keyed by the connection: a
        # context holding the connection itself would keep every connection the pool ever
        # replaced alive with it.
        raw = psycopg.connect(connection.connection.info.dsn, autocommit=True)
        contexts: weakref.WeakKeyDictionary[Any, batch.Context] = weakref.WeakKeyDictionary()
        context = contexts[raw] = batch.Context(raw, None)
        statement = batch.convert(context.transformer(), "SELECT %s::int", [7])
        assert batch.run(raw, [statement], context.transformer(), THRESHOLD) == [[(7,)]]
        gone = weakref.ref(raw)
        raw.close()
        del raw, statement
        gc.collect()
        assert gone() is None and len(contexts) == 0

    def test_no_more_names_than_the_connection_allows(self, fresh: Any) -> None:
        most = connection.connection.prepared_max
        for n in range(most + 5):
            for _ in range(THRESHOLD + 1):
                assert run_together([(f"SELECT %s::int + {n}", [1])]) == [[(1 + n,)]]
        assert len(_prepared()) == most
