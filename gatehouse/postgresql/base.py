"""Django's PostgreSQL backend; a pooled connection is checked on checkout without a query,
the statements on every call's path may be kept prepared, and no index is made that no
query needs (`DatabaseSchemaEditor`).

psycopg-pool checks a connection before handing it out when Django asks it to
(`CONN_HEALTH_CHECKS`): it sends an empty query and waits for the answer. That is one more
round trip for every request and every Channels database call: one of the eleven of an
auto-decided submit's own request, and one more for its card (docs/PERFORMANCE.md). Without a check, connections that a
database restart or a network cut had killed were handed out, and the first calls after
an outage failed (docs/RELIABILITY.md, fault 1c).

An idle connection has nothing to read: PostgreSQL writes to it only to answer a query.
When the server ends the session (a restart, `pg_terminate_backend`, an idle timeout) it
sends an error and closes the socket, and a cut connection is closed under it: either
way the socket becomes readable. So a connection is handed out only if psycopg still
holds it open and idle and its socket has nothing to read; any other is closed, given
back (the pool replaces it) and the next one is tried. A server that vanished without a
word (a cable pulled) is missed, as the empty query would miss it until its timeout.

Django's cursors bind parameters client-side: the values are quoted into the text, and the
server parses and plans every statement afresh. For the reads of fixed text that
every call makes (the bearer token's agent, a submit's context), that was most of the
server's work: 0.26 ms of PostgreSQL's CPU for the token's read, 0.09 ms once prepared
(docs/PERFORMANCE.md, nineteenth pass). `run_pipeline` sends the statements on every
call's path (`approvals.written.run_together`), one or several, in one round trip with
the parameters bound server-side, and keeps a statement prepared once the connection has
sent its text `prepare_threshold` times (settings: `DB_PREPARED`), so the server reuses
its plan (`gatehouse.postgresql.batch`). psycopg's own preparing is off.
"""

from __future__ import annotations

import logging
import select
import weakref
from collections.abc import Sequence
from typing import Any

import psycopg
from django.db.backends.postgresql import base, schema
from django.db.backends.postgresql.psycopg_any import register_tzloader

from gatehouse.postgresql import batch

log = logging.getLogger(__name__)


def sound(connection: psycopg.Connection[Any]) -> bool:
    """True for an open, idle connection whose socket has nothing to read."""
    if connection.closed or connection.broken:
        return False
    if connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return False
    poller = select.poll()  # not select.select: the process holds more than 1024 sockets
    poller.register(connection.fileno(), select.POLLIN)
    return not poller.poll(0)


class DatabaseSchemaEditor(schema.DatabaseSchemaEditor):
    """Django's, without the pattern-matching index it adds beside every unique or indexed
    text column (`varchar_pattern_ops`, for `LIKE 'prefix%'` outside the C locale).

    No query here matches a prefix of such a column, and every insert kept the copy up: an
    audit row's hash and its chain link had one each (migration approvals 0030). A column
    a prefix query needs declares its own (`Index(fields=[...], opclasses=[...])`).
    """

    def _create_like_index_sql(self, model: Any, field: Any) -> None:
        return None


class _Queue:
    """A cursor for Django's wrappers to call: it converts what it is given to execute and
    keeps it for `run_pipeline` to send with the rest."""

    def __init__(self, context: batch.Context) -> None:
        self.context = context
        self.dumper = context.transformer()
        self.statements: list[batch.Statement] = []
        self._query: batch.Statement | None = None  # Django's query log reads its `query`

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self._query = batch.convert(self.dumper, sql, params)
        self.statements.append(self._query)

    def close(self) -> None:
        pass


class DatabaseWrapper(base.DatabaseWrapper):
    SchemaEditorClass = DatabaseSchemaEditor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._batch_contexts: weakref.WeakKeyDictionary[psycopg.Connection[Any], batch.Context] = (
            weakref.WeakKeyDictionary()
        )

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        pool = self.pool  # type: ignore[attr-defined]  # Django 5.1+; django-stubs lacks it
        if pool is None:
            return connection
        # Every connection the pool holds may have died in the same outage; past them
        # the pool opens new ones.
        for _ in range(pool.max_size):
            if sound(connection):
                return connection
            connection.close()
            pool.putconn(connection)
            connection = super().get_new_connection(conn_params)
        return connection

    @property
    def prepare_after(self) -> int | None:
        """How many times a connection sends a statement's text before it keeps it prepared
        (settings: `DB_PREPARED`); None: never."""
        return self.settings_dict["OPTIONS"].get("prepare_threshold")

    def get_connection_params(self) -> dict[str, Any]:
        params: dict[str, Any] = super().get_connection_params()
        # psycopg prepares nothing of its own: after any rollback it would send DEALLOCATE
        # ALL, which drops the batches' prepared statements too (`batch`, `prepare_after`).
        params["prepare_threshold"] = None
        return params

    def run_pipeline(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        """Run these statements in one round trip (`gatehouse.postgresql.batch`); each one's rows.

        - Each goes through Django's cursor wrappers as it is queued (the execute
          wrappers, the query log, error translation), is converted there and its
          parameters dumped: one psycopg cannot send raises before anything is sent.
        - Several, with autocommit on, go between a BEGIN and a COMMIT of their own, in
          the same round trip: nothing commits unless the COMMIT, sent last, is reached.
        - All are sent with one flush and their answers read once the server has all; a
          text sent `prepare_after` times is kept prepared.
        """
        self.close_if_health_check_failed()
        self.ensure_connection()
        raw = self.connection
        queue = _Queue(self._batch_context(raw))
        wrapper = self._prepare_cursor(queue)  # type: ignore[attr-defined]  # not in django-stubs
        own = len(statements) > 1 and self.get_autocommit()
        if own:
            queue.statements.append(batch.convert(queue.dumper, "BEGIN", None, keep=False))
        for sql, params in statements:
            wrapper.execute(sql, params)
        if own:
            queue.statements.append(batch.convert(queue.dumper, "COMMIT", None, keep=False))
        try:
            with self.wrap_database_errors:
                rows = batch.run(raw, queue.statements, queue.context.transformer(), self.prepare_after)
        except BaseException:
            self._abandon_pipeline(own=own)
            raise
        return rows[1:-1] if own else rows

    def _batch_context(self, raw: psycopg.Connection[Any]) -> batch.Context:
        """The adapters a batch on `raw` uses: its own, with the loader of this zone."""
        context = self._batch_contexts.get(raw)
        if context is None or context.timezone != self.timezone:
            context = batch.Context(raw, self.timezone)
            register_tzloader(self.timezone, context)
            self._batch_contexts[raw] = context
        return context

    def _abandon_pipeline(self, *, own: bool) -> None:
        """After a batch failed: its own transaction rolled back.

        The server skips every statement after the one that failed, the COMMIT too, so
        the transaction the batch opened is left aborted. psycopg's `rollback()` ends it
        (the batches' prepared statements outlive it: a name is kept once the server has
        answered its Parse). Inside a caller's transaction the caller's atomic
        block rolls back. A failed batch is rare (a lost race, a replayed call).
        """
        raw = self.connection
        if not own or raw is None or raw.closed:
            return
        if raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            try:
                raw.rollback()  # psycopg's: out of the aborted pipeline, ROLLBACK
            except Exception:
                # A connection that cannot roll back must never run another statement in
                # that transaction: closed, the next statement opens a new one.
                log.warning("closing a connection whose failed statements could not be rolled back", exc_info=True)
                self.close()
