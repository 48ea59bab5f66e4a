"""The statements a connection sends, grouped by round trip, for tests that count them."""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connection
from psycopg.pq import Trace


@contextlib.contextmanager
def round_trips() -> Iterator[list[list[str]]]:
    """Yield the list the statements sent in the block go into, one list per round trip.

    - A statement queued for a batch (`run_together` on PostgreSQL, which sends its
      statements together and reads their results once all are sent) joins the one
      before it when that one was queued for the same batch.
    - Any other statement is a round trip of its own.
    """
    trips: list[list[str]] = []
    last: object = None  # the batch the statement before was queued for, if any

    def record(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        nonlocal last
        queue = getattr(context["cursor"], "cursor", None)
        batch = queue if hasattr(queue, "statements") else None  # gatehouse.postgresql's _Queue
        if batch is not None and batch is last:
            trips[-1].append(sql)
        else:
            trips.append([sql])
        last = batch
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield trips


@contextlib.contextmanager
def protocol() -> Iterator[list[list[str]]]:
    """Yield the list the statements PostgreSQL is sent in the block go into, one list per
    round trip, as libpq's own trace of the protocol shows them (PostgreSQL only).

    - A round trip ends where the server says it is ready for the next (`ReadyForQuery`),
      after a Sync or a simple query. A statement is each one executed, by its text: that
      of the statement it binds (prepared earlier in the block or just now), or
      `<_pg3_N>` (psycopg's) or `<gh_N>` (a batch's) for one prepared before the block.
      The BEGIN and COMMIT psycopg or a batch sends of its own are among them.
    """
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    trips: list[list[str]] = []
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
        try:
            yield trips
        finally:
            pgconn.untrace()
            trace.seek(0)
            sent: list[str] = []
            texts: dict[str, str] = {}  # statement name ("" the unnamed) -> its text
            bound = ""
            for line in trace.read().splitlines():
                if parsed := re.match(r'^F\t\d+\tParse\t "([^"]*)" "(.*?)" \d+', line):
                    texts[parsed.group(1)] = parsed.group(2)
                elif binding := re.match(r'^F\t\d+\tBind\t "[^"]*" "([^"]*)"', line):
                    bound = texts.get(binding.group(1), f"<{binding.group(1)}>")
                elif re.match(r"^F\t\d+\tExecute\t", line):
                    sent.append(bound)
                elif query := re.match(r'^F\t\d+\tQuery\t "(.*)"$', line):
                    sent.append(query.group(1))
                elif "\tReadyForQuery\t" in line:
                    trips.append(sent)
                    sent = []


def protocol_if_postgresql() -> contextlib.AbstractContextManager[list[list[str]]]:
    """`protocol()` on PostgreSQL; elsewhere an empty list."""
    return protocol() if connection.vendor == "postgresql" else contextlib.nullcontext([])
