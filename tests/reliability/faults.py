"""Faults for the reliability tests, made for real: in the database, in Redis, in the process.

Nothing here patches Gatehouse's code. The audit store is broken the way production
breaks it (a refusing trigger, a lock held by another session), Redis is killed,
flushed or frozen with SIGSTOP, and servers die by SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

from tests.live import test_database_url

REFUSE = {
    "sqlite": [
        "CREATE TRIGGER gh_fault_audit BEFORE INSERT ON approvals_decision "
        "BEGIN SELECT RAISE(ABORT, 'audit storage unavailable (fault injected)'); END;"
    ],
    "postgresql": [
        "CREATE FUNCTION gh_fault_audit() RETURNS trigger AS $$ BEGIN "
        "RAISE EXCEPTION 'audit storage unavailable (fault injected)'; END; $$ LANGUAGE plpgsql;",
        "CREATE TRIGGER gh_fault_audit BEFORE INSERT ON approvals_decision "
        "FOR EACH ROW EXECUTE FUNCTION gh_fault_audit();",
    ],
}
MEND = {
    "sqlite": ["DROP TRIGGER IF EXISTS gh_fault_audit;"],
    "postgresql": [
        "DROP TRIGGER IF EXISTS gh_fault_audit ON approvals_decision;",
        "DROP FUNCTION IF EXISTS gh_fault_audit();",
    ],
}


def _run(statements: list[str]) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


@contextmanager
def audit_refuses_inserts() -> Iterator[None]:
    """Every insert into the audit table fails, as on a full disk or a revoked grant."""
    _run(REFUSE[connection.vendor])
    try:
        yield
    finally:
        _run(MEND[connection.vendor])


@contextmanager
def audit_locked() -> Iterator[None]:
    """Another session holds the write lock (SQLite) or an exclusive table lock (PostgreSQL)."""
    url = test_database_url()
    if connection.vendor == "sqlite":
        other = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False)
        other.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            other.execute("ROLLBACK")
            other.close()
    else:
        import psycopg

        with psycopg.connect(url) as session:
            session.execute("LOCK TABLE approvals_decision IN ACCESS EXCLUSIVE MODE")
            try:
                yield
            finally:
                session.rollback()


class Freezer:
    """SIGSTOP a process for a while (a GC pause, a VM migration), then SIGCONT it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._timer: threading.Timer | None = None

    def freeze_for(self, seconds: float) -> None:
        os.kill(self.pid, signal.SIGSTOP)
        self._timer = threading.Timer(seconds, self.thaw)
        self._timer.start()

    def thaw(self) -> None:
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def __enter__(self) -> Freezer:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.thaw()
