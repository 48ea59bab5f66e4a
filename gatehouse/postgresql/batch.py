"""Several statements sent to PostgreSQL in one write and answered in one read, on libpq's
pipeline mode directly (`psycopg.pq`), for `DatabaseWrapper.run_pipeline`.

psycopg's own pipeline flushes the socket after every statement it is given: seven
statements (a BEGIN, five, a COMMIT) took 8 `sendto` and 16 `poll` calls, and PostgreSQL
woke for each write. On a 2-core machine each wake-up can take the core from the thread
that holds the interpreter. Here every statement is first converted and its parameters
dumped, in Python, then all are queued with libpq and sent with one flush: one write,
one wake-up, one read (docs/PERFORMANCE.md, twenty-fifth pass).

What psycopg's cursors did for them is kept:

- **Parameters** are dumped by a `Transformer` of the connection's adapters, with the
  time-zone loader Django's cursors use, and rows are loaded by it.
- **Prepared statements.** A statement text (with its parameter types) the connection has
  sent `prepare_threshold` times is prepared, its `Parse` in the batch, under a name of
  this module's (`gh_N`, apart from psycopg's `_pg3_N`). A name is recorded only once the
  server has answered the `Parse`: a batch that failed before it leaves nothing recorded
  that the server skipped. At most `prepared_max` names per connection; past that,
  statements go unnamed. `DB_PREPARED=0` (a pooler that cannot keep them) prepares none.
  psycopg's own preparing is off (`DatabaseWrapper.get_connection_params`): after any
  rollback it sends `DEALLOCATE ALL`, which would drop these names too.
- **A transaction where psycopg would open one**: outside autocommit, psycopg sends a
  BEGIN before a connection's first statement; the batch puts the same BEGIN at the head
  of its write.
- **Errors** come back as psycopg's exception for the first statement that failed; the
  ones after it are skipped by the server, as in any pipeline.
"""

from __future__ import annotations

import re
import select
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import abc, errors, pq
from psycopg.adapt import AdaptersMap, PyFormat, Transformer

Status = pq.ExecStatus

# A connection keeps a count of the texts it has sent unprepared, to prepare the frequent
# ones; the count starts over past this many texts (reads of `IN (…)` lists vary).
SEEN_MAX = 1000


@lru_cache(maxsize=512)
def numbered(sql: str) -> tuple[bytes, int]:
    """Django's `%s` placeholders as PostgreSQL's `$1`, `$2`…, `%%` as `%`; and how many."""
    count = 0

    def placeholder(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(1) == "%":
            return "%"
        if match.group(1) != "s":
            raise psycopg.ProgrammingError(f"only %s placeholders are sent together, not %{match.group(1)}: {sql!r}")
        count += 1
        return f"${count}"

    return re.sub(r"%(.|$)", placeholder, sql, flags=re.DOTALL).encode(), count


@dataclass
class Statement:
    """One statement, converted and its parameters dumped, ready to queue."""

    query: bytes
    values: Sequence[abc.Buffer | None]
    types: tuple[int, ...]
    formats: Sequence[pq.Format]
    keep: bool = True  # may be prepared (not a BEGIN or a COMMIT)


@dataclass
class _Kept:
    """What a connection has prepared under this module's names, and how often it sent the rest."""

    names: dict[tuple[bytes, tuple[int, ...]], bytes] = field(default_factory=dict)
    seen: dict[tuple[bytes, tuple[int, ...]], int] = field(default_factory=dict)
    next_name: int = 0


_KEPT: weakref.WeakKeyDictionary[psycopg.Connection[Any], _Kept] = weakref.WeakKeyDictionary()


def forget(connection: psycopg.Connection[Any]) -> None:
    """Forget what `connection` keeps prepared here, after its caller deallocated it
    (`DEALLOCATE ALL`, `DISCARD ALL`): the texts are prepared again after the threshold."""
    _KEPT.pop(connection, None)


class Context:
    """The adapters a batch's statements are dumped and its rows loaded with: the
    connection's, and Django's time-zone loader as its cursors have it.

    - It refers to its connection weakly: the database wrapper keeps a context per
      connection, weakly keyed by the connection, and a context holding it would keep
      every connection the pool ever replaced alive.
    """

    def __init__(self, connection: psycopg.Connection[Any], timezone: Any) -> None:
        self._connection = weakref.ref(connection)
        self.timezone = timezone
        self.adapters = AdaptersMap(connection.adapters)

    @property
    def connection(self) -> psycopg.Connection[Any] | None:
        return self._connection()

    def transformer(self) -> abc.Transformer:
        return Transformer.from_context(self)


def convert(transformer: abc.Transformer, sql: str, params: Sequence[Any] | None, *, keep: bool = True) -> Statement:
    """`sql` with `params` as libpq takes them; raises psycopg's error for a value it cannot send."""
    query, count = numbered(sql)
    params = list(params or ())
    if len(params) != count:
        raise psycopg.ProgrammingError(f"the statement takes {count} parameters, {len(params)} were given")
    values = transformer.dump_sequence(params, [PyFormat.AUTO] * count)
    return Statement(query, values, tuple(transformer.types or ()), list(transformer.formats or ()), keep)


def run(
    connection: psycopg.Connection[Any],
    statements: Sequence[Statement],
    loader: abc.Transformer,
    threshold: int | None,
) -> list[list[tuple[Any, ...]]]:
    """Send `statements` in one write, read every answer, and return each one's rows.

    Raises psycopg's error for the first that failed. The caller wraps the statements in
    a transaction of their own where it wants one (a BEGIN and a COMMIT among them).
    """
    pgconn = connection.pgconn
    # Outside autocommit, psycopg opens a transaction before a connection's first
    # statement; these statements bypass its cursors, so the batch opens it itself.
    opens = not connection.autocommit and pgconn.transaction_status == pq.TransactionStatus.IDLE
    if opens:
        statements = [Statement(_begin(connection), [], (), [], keep=False), *statements]
    kept = _KEPT.get(connection)
    if kept is None:
        kept = _KEPT[connection] = _Kept()
    # Per answer expected, in order: the name and key a Parse records once answered, or
    # None for a statement's own answer.
    plan: list[tuple[bytes, tuple[bytes, tuple[int, ...]]] | None] = []
    with connection.lock:
        pgconn.enter_pipeline_mode()
        try:
            for statement in statements:
                name = _name(connection, kept, statement, threshold)
                if name is not None and (statement.query, statement.types) not in kept.names:
                    pgconn.send_prepare(name, statement.query, statement.types)
                    plan.append((name, (statement.query, statement.types)))
                if name is not None:
                    pgconn.send_query_prepared(name, statement.values, statement.formats)
                else:
                    pgconn.send_query_params(statement.query, statement.values, statement.types, statement.formats)
                plan.append(None)
            pgconn.pipeline_sync()
            _flush(pgconn)
            answers = [_answer(pgconn) for _ in plan]
            _synced(pgconn)
            pgconn.exit_pipeline_mode()
        except BaseException:
            # Whatever was sent, the connection's state is unknown: it is closed, and the
            # pool replaces it.
            pgconn.finish()
            raise

    failure: psycopg.Error | None = None
    rows: list[list[tuple[Any, ...]]] = []
    for parse, result in zip(plan, answers, strict=True):
        status = result.status
        if status == Status.TUPLES_OK and parse is None:
            loader.set_pgresult(result)
            rows.append(loader.load_rows(0, result.ntuples, tuple))
        elif status == Status.COMMAND_OK or status == Status.PIPELINE_ABORTED:
            if parse is None:
                rows.append([])
            elif status == Status.COMMAND_OK:
                kept.names[parse[1]] = parse[0]
            elif threshold is not None:  # skipped: the next run prepares it
                kept.seen[parse[1]] = threshold
        elif failure is None:
            failure = errors.error_from_result(result, encoding=connection.info.encoding)
    if failure is not None:
        if failure.sqlstate == "26000":  # a name recorded here is gone (DEALLOCATE, DISCARD)
            forget(connection)
        raise failure
    return rows[1:] if opens else rows


def _begin(connection: psycopg.Connection[Any]) -> bytes:
    """The BEGIN psycopg sends to open a transaction on `connection`, with its characteristics."""
    parts = [b"BEGIN"]
    if connection.isolation_level is not None:
        parts += [
            b"ISOLATION LEVEL",
            psycopg.IsolationLevel(connection.isolation_level).name.replace("_", " ").encode(),
        ]
    if connection.read_only is not None:
        parts.append(b"READ ONLY" if connection.read_only else b"READ WRITE")
    if connection.deferrable is not None:
        parts.append(b"DEFERRABLE" if connection.deferrable else b"NOT DEFERRABLE")
    return b" ".join(parts)


def _name(
    connection: psycopg.Connection[Any], kept: _Kept, statement: Statement, threshold: int | None
) -> bytes | None:
    """The name `statement` runs under: one it is prepared as, or one to prepare it as now
    (its text sent `threshold` times before); None to send it unnamed."""
    key = (statement.query, statement.types)
    if (name := kept.names.get(key)) is not None:
        return name
    most = connection.prepared_max
    if not statement.keep or threshold is None or (most is not None and len(kept.names) >= most):
        return None
    seen = kept.seen.get(key, 0)
    if seen < threshold:
        if len(kept.seen) >= SEEN_MAX:
            kept.seen.clear()
        kept.seen[key] = seen + 1
        return None
    kept.seen.pop(key, None)
    kept.next_name += 1
    return f"gh_{kept.next_name}".encode()


def _wait(pgconn: pq.abc.PGconn, events: int) -> int:
    poller = select.poll()  # not select.select: the process holds more than 1024 sockets
    poller.register(pgconn.socket, events)
    ready = 0
    while not ready:
        ready = sum(event for _, event in poller.poll())
    return ready


def _flush(pgconn: pq.abc.PGconn) -> None:
    """Send what libpq holds; while the socket is full, read what the server answers meanwhile."""
    while pgconn.flush():
        if _wait(pgconn, select.POLLOUT | select.POLLIN) & select.POLLIN:
            pgconn.consume_input()


def _next(pgconn: pq.abc.PGconn) -> pq.abc.PGresult | None:
    while pgconn.is_busy():
        _wait(pgconn, select.POLLIN)
        pgconn.consume_input()
    return pgconn.get_result()


def _answer(pgconn: pq.abc.PGconn) -> pq.abc.PGresult:
    """One queued command's result, and the end of its results."""
    result = _next(pgconn)
    if result is None:
        raise psycopg.OperationalError("the server ended a command's results without one")
    while _next(pgconn) is not None:  # a command sends one result here; a later one would replace it
        pass
    return result


def _synced(pgconn: pq.abc.PGconn) -> None:
    result = _next(pgconn)
    if result is None or result.status != Status.PIPELINE_SYNC:
        raise psycopg.OperationalError("the server did not end the batch where it was synced")
