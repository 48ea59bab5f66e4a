"""The statements a connection sends, grouped by round trip, for tests that count them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connection
from psycopg.pq import PipelineStatus


@contextlib.contextmanager
def round_trips() -> Iterator[list[list[str]]]:
    """Yield the list the statements sent in the block go into, one list per round trip.

    - A statement executed while the connection is in psycopg's pipeline mode joins the
      one before it when that one was in the same pipeline (`approvals.written.read_together`
      sends its reads so, and reads their results only once all are sent).
    - Any other statement is a round trip of its own; a message of several statements
      (`run_together`) is one statement here.
    """
    trips: list[list[str]] = []
    last: object = None  # the pipeline the statement before was sent in, if any

    def record(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        nonlocal last
        raw = context["connection"].connection
        pgconn = getattr(raw, "pgconn", None)
        pipeline = None
        if pgconn is not None and pgconn.pipeline_status != PipelineStatus.OFF:
            pipeline = raw._pipeline  # psycopg's own, for as long as the pipeline lasts
        if pipeline is not None and pipeline is last:
            trips[-1].append(sql)
        else:
            trips.append([sql])
        last = pipeline
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield trips
