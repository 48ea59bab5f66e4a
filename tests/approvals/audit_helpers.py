"""Tampering with the audit log as an attacker with database access would, for the tests that must catch it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module
from typing import Any

from django.db import connection

SQLITE_GUARD_MIGRATION = import_module("approvals.migrations.0003_audit_no_update_sqlite")
SQLITE_GUARD_CREATE: str = SQLITE_GUARD_MIGRATION.CREATE
SQLITE_GUARD_DROP: str = SQLITE_GUARD_MIGRATION.DROP


@contextmanager
def tamper() -> Iterator[Any]:
    """A raw cursor that may rewrite the audit table, its guard trigger off (as an attacker would)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Django's foreign keys are deferred; ALTER TABLE refuses while their checks wait.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("ALTER TABLE approvals_decision DISABLE TRIGGER approvals_decision_append_only")
        else:
            cursor.execute(SQLITE_GUARD_DROP)
        try:
            yield cursor
        finally:
            if connection.vendor == "postgresql":
                cursor.execute("ALTER TABLE approvals_decision ENABLE TRIGGER approvals_decision_append_only")
            else:
                cursor.execute(SQLITE_GUARD_CREATE)
