"""Statements of fixed text are prepared once per PostgreSQL connection (`written.send`).

Each runs as its text would, on both engines; on PostgreSQL the first message on a
connection prepares it and later ones run it by name. A message that fails after its
`PREPARE` (which PostgreSQL keeps whatever becomes of the transaction) and a connection
whose statements were dropped under it (a pooler's reset) must not leave a connection
that fails every call after: the first sends the statement as text from then on, the
second fails closed once and then sends text.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from approvals.written import Prepared, run_together, spelled_out

pytestmark = pytest.mark.django_db(transaction=True)

postgresql_only = pytest.mark.skipif("connection.vendor != 'postgresql'")


def _statement(sql: str) -> Prepared:
    # A text of its own: the connection outlives each test, and what it prepared with it.
    return Prepared(f'{sql} AS "x{uuid.uuid4().hex}"')


def _sent(statements: Any) -> tuple[list[list[tuple[Any, ...]]], list[str]]:
    with CaptureQueriesContext(connection) as captured:
        rows = run_together(statements)
    return rows, [query["sql"] for query in captured.captured_queries]


# What each statement returns; its parameters' types follow from where they stand.
TABLE = [
    ("SELECT 1", [], [(1,)]),
    ("SELECT CAST(%s AS INTEGER) + 1", [41], [(42,)]),
    ("SELECT 'a%%b' || CAST(%s AS TEXT)", ["c"], [("a%bc",)]),
    (
        "SELECT CAST(%s AS TEXT) || CAST(%s AS TEXT) || CAST(%s AS TEXT)",
        ["x", "-", "it's; PREPARE gh_0; $1"],
        [("x-it's; PREPARE gh_0; $1",)],
    ),
]


@pytest.mark.parametrize(("sql", "params", "expected"), TABLE)
def test_a_prepared_statement_returns_what_its_text_returns(sql: str, params: list[Any], expected: Any) -> None:
    statement = _statement(sql)
    for _ in range(7):  # past the five custom plans PostgreSQL makes before a generic one
        assert run_together([(statement, params), (f"SELECT {len(params)}", [])]) == [expected, [(len(params),)]]


@postgresql_only
def test_it_is_prepared_once_per_connection_then_run_by_name() -> None:
    statement = _statement("SELECT %s::int * 2")
    rows, [first] = _sent([("SELECT 0", []), (statement, [21])])
    assert rows == [[(0,)], [(42,)]]
    assert first.startswith("PREPARE gh_") and "EXECUTE gh_" in first
    rows, [second] = _sent([(statement, [5])])
    assert rows == [[(10,)]]
    assert second.startswith("EXECUTE gh_") and "PREPARE" not in second
    assert spelled_out(first) == f"SELECT 0; {statement}(21)"
    assert spelled_out(second) == f"{statement}(5)"


@postgresql_only
def test_a_message_that_fails_after_its_prepare_leaves_the_connection_usable() -> None:
    statement = _statement("SELECT %s::int + 1")
    with pytest.raises(DatabaseError):
        run_together([(statement, [1]), ("SELECT 1 / 0", [])])
    # Perhaps prepared, perhaps not: sent as text from now on, never prepared twice.
    for n in range(3):
        rows, [sent] = _sent([(statement, [n])])
        assert rows == [[(n + 1,)]]
        assert not sent.startswith(("PREPARE", "EXECUTE"))


@postgresql_only
def test_a_message_that_fails_in_a_transaction_leaves_the_connection_usable() -> None:
    statement = _statement("SELECT %s::int + 2")
    with pytest.raises(DatabaseError), transaction.atomic():
        run_together([(statement, [1]), ("SELECT 1 / 0", [])])
    assert run_together([(statement, [1])]) == [[(3,)]]


@postgresql_only
def test_statements_dropped_under_the_connection_fail_once_then_go_as_text() -> None:
    statement = _statement("SELECT %s::int - 1")
    assert run_together([(statement, [1])]) == [[(0,)]]
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # what a pooler's reset (DISCARD ALL) does
    with pytest.raises(DatabaseError):
        run_together([(statement, [1])])  # fails closed: the call is not run
    try:
        rows, [sent] = _sent([(statement, [2]), (_statement("SELECT %s::int"), [7])])
        assert rows == [[(1,)], [(7,)]]
        assert "PREPARE" not in sent and "EXECUTE" not in sent
    finally:
        connection.close()  # the next test starts with a connection that prepares


def test_plain_statements_are_sent_as_written() -> None:
    rows, [sent] = _sent([("SELECT CAST(%s AS INTEGER) + 40", [2])])
    assert rows == [[(42,)]]
    assert sent.startswith("SELECT")
