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
(docs/PERFORMANCE.md, nineteenth pass). `bound_cursor` is Django's cursor with the
parameters bound server-side, as `server_side_binding` would make every cursor, so psycopg
prepares a statement the connection has run `prepare_threshold` times (settings:
`DB_PREPARED`) and the server reuses its plan. `run_pipeline` sends several such
statements in one round trip (`approvals.written.run_together`).
"""

from __future__ import annotations

import logging
import select
from collections.abc import Sequence
from typing import Any

import psycopg
from django.db.backends.postgresql import base, schema
from django.db.backends.postgresql.psycopg_any import register_tzloader
from django.db.backends.utils import CursorWrapper
from psycopg.pq import Format

TIMESTAMPTZ_OID = psycopg.adapters.types["timestamptz"].oid

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


class DatabaseWrapper(base.DatabaseWrapper):
    SchemaEditorClass = DatabaseSchemaEditor

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

    def bound_cursor(self) -> CursorWrapper:
        """Django's cursor, but binding its parameters server-side: one statement per
        `execute`, which psycopg prepares once the connection has run it `prepare_threshold`
        times. The same execute wrappers, error translation and time zone as `cursor()`."""
        self.close_if_health_check_failed()
        self.ensure_connection()
        with self.wrap_database_errors:
            cursor = base.ServerBindingCursor(self.connection)  # type: ignore[attr-defined]  # psycopg 3's; not in django-stubs
            # As Django's `create_cursor`: the cursor reads dates in the connection's zone.
            loader: Any = self.connection.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
            if self.timezone != loader.timezone:
                register_tzloader(self.timezone, cursor)
            return self._prepare_cursor(cursor)  # type: ignore[attr-defined]  # not in django-stubs

    def run_pipeline(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        """Run these statements in one round trip, in psycopg's pipeline mode; each one's rows.

        - Each goes on a `bound_cursor`: Django's execute wrappers see it, and psycopg
          prepares it once the connection has run it `prepare_threshold` times.
        - With autocommit on, they go between a BEGIN and a COMMIT of their own, in the
          same round trip. Without them the Sync would end their transaction, and when a
          statement fails before it is sent (a parameter psycopg cannot send), psycopg
          still sends the Sync as it leaves the pipeline: the ones already sent would
          commit. With them, nothing commits unless the COMMIT, sent last, is reached.
        - The results are read once the pipeline is left, whose exit sends the one Sync.
        """
        cursors = [self.bound_cursor() for _ in statements]
        raw = self.connection
        ends = raw.cursor() if self.get_autocommit() else None  # psycopg's own, never prepared
        try:
            with self.wrap_database_errors:
                with raw.pipeline():
                    if ends is not None:
                        ends.execute("BEGIN", prepare=False)
                    for cursor, (sql, params) in zip(cursors, statements, strict=True):
                        cursor.execute(sql, params)
                    if ends is not None:
                        ends.execute("COMMIT", prepare=False)
                return [cursor.fetchall() if cursor.description is not None else [] for cursor in cursors]
        except BaseException:
            self._abandon_pipeline(own=ends is not None)
            raise
        finally:
            for cursor in cursors:
                cursor.close()
            if ends is not None:
                ends.close()

    def _abandon_pipeline(self, *, own: bool) -> None:
        """After a pipeline failed: its own transaction rolled back (psycopg's `rollback()`).

        The rollback also clears psycopg's record of the statements it prepared on the
        connection, as any ROLLBACK it sees does (a caller's transaction's, to a savepoint
        or whole). That record must go: psycopg prepares a statement on the run after
        `prepare_threshold`, with its Parse in the pipeline, and records it as prepared
        without waiting for the Parse's result. When a statement before it fails, the server
        skips the rest of the pipeline, that Parse too; had the record stayed, every later
        run of the statement on that connection would fail with "prepared statement does
        not exist" (psycopg 3.3.9; a person's decision whose fence had moved did it,
        `tests/approvals/test_prepared_statements.py`). The statements are prepared again
        after the threshold. A failed pipeline is rare (a lost race, a replayed call).
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
