"""The upgrade itself: rows written before format 2 stay format 1 and still verify.

Runs the real migrations on a database holding audit rows of the old schema: back to
0008 (no `format` column), rows written as the old code wrote them, then forward to the
newest schema; `audit_verify` passes, every old row is format 1, a new row is the current format,
and an old row's edit is still found.
"""

from __future__ import annotations

import io
from importlib import import_module
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from approvals.audit import CURRENT_FORMAT, GENESIS_HASH, decision_fields, payload_hash

SQLITE_GUARD = import_module("approvals.migrations.0003_audit_no_update_sqlite")

# SQLite only (not in conftest's db_engine list): the edit below lifts SQLite's UPDATE guard.
pytestmark = pytest.mark.django_db(transaction=True)

OLD = ("approvals", "0008_audit_search")


def write_old_rows(apps: Any, count: int) -> list[int]:
    """Rows of the old schema, chained by the format-1 hash as the old code chained them."""
    team = apps.get_model("approvals", "Team").objects.create(name="old-team")
    agent = apps.get_model("approvals", "Agent").objects.create(name="old-bot", team=team, token_hash="x" * 64)
    request_model = apps.get_model("approvals", "PermissionRequest")
    decision_model = apps.get_model("approvals", "Decision")
    prev, ids = GENESIS_HASH, []
    for n in range(count):
        request = request_model.objects.create(
            agent=agent, team=team, tool_use_id=f"old-{n}", tool_name="Bash", tool_input={"command": f"ls {n}"}
        )
        row = decision_model(
            request=request,
            agent=agent,
            team=team,
            tool_name="Bash",
            session_id="s",
            behavior="deny",
            message="no",
            reason_type="rule",
            reason={"type": "rule"},
            rule="Bash(ls:*)",
            rule_source="policySettings",
            decided_by="engine",
            surface="engine",
            latency_ms=1.5,
            created_at=timezone.now(),
            prev_hash=prev,
        )
        row.hash = payload_hash(prev, decision_fields(row))
        row.save()
        prev = row.hash
        ids.append(row.pk)
    return ids


def verify() -> str:
    try:
        call_command("audit_verify", stdout=io.StringIO(), stderr=io.StringIO())
    except CommandError as exc:
        return str(exc)
    return ""


class AuditUpgradeMigrationTests:
    def test_old_rows_keep_format_1_verify_after_the_upgrade_and_edits_are_still_found(self, ci_bot: Any) -> None:
        from approvals import services
        from approvals.models import Decision

        executor = MigrationExecutor(connection)
        newest = executor.loader.graph.leaf_nodes()
        try:
            executor.migrate([OLD])
            executor = MigrationExecutor(connection)
            ids = write_old_rows(executor.loader.project_state([OLD]).apps, 4)
        finally:
            executor = MigrationExecutor(connection)
            executor.loader.build_graph()
            executor.migrate(newest)
        assert sorted(Decision.objects.values_list("format", flat=True)) == [1, 1, 1, 1]
        assert verify() == ""
        call = {"tool_name": "TaskList", "tool_input": {"n": 1}, "tool_use_id": "after-upgrade"}
        new = services.request_submit(agent=ci_bot.agent, call=call).decision
        assert new is not None and Decision.objects.get(pk=new.pk).format == CURRENT_FORMAT
        assert verify() == ""
        with connection.cursor() as cursor:  # format 1 covers the decision's own fields
            cursor.execute(SQLITE_GUARD.DROP)
            try:
                cursor.execute("UPDATE approvals_decision SET message = 'edited' WHERE id = %s", [ids[1]])
            finally:
                cursor.execute(SQLITE_GUARD.CREATE)  # later tests in this process rely on it
        assert verify() != ""
