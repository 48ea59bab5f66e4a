"""The audit log is append-only and hash-chained: `audit_verify` finds an edited or deleted row."""

from __future__ import annotations

import io
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals import services
from approvals.audit import canonical_json, chain_hash, verify_chain, verify_row
from approvals.models import AuditSearch, AuditTamperError, Decision, PermissionRequest
from tests.approvals.audit_helpers import tamper
from tests.live import ROOT, server_env


def decide_some(agent: Any, count: int) -> list[Decision]:
    rows = []
    for index in range(count):
        result = services.request_submit(
            agent=agent, call={"tool_name": "TaskList", "tool_input": {"n": index}, "tool_use_id": f"chain_{index}"}
        )
        assert result.decision is not None
        rows.append(result.decision)
    return rows


def verify() -> str:
    """Run audit_verify; return its error, or "" if the chain is intact."""
    try:
        call_command("audit_verify", stdout=io.StringIO(), stderr=io.StringIO())
    except CommandError as exc:
        return str(exc)
    return ""


@pytest.mark.django_db
class AuditChainTests:
    def test_it_verifies_an_untouched_chain(self, ci_bot: Any) -> None:
        rows = decide_some(ci_bot.agent, 5)
        assert verify() == ""
        assert rows[1].prev_hash == rows[0].hash
        assert all(verify_row(row) for row in rows)

    def test_it_detects_an_edited_row(self, ci_bot: Any) -> None:
        rows = decide_some(ci_bot.agent, 5)
        with tamper() as cursor:
            cursor.execute("UPDATE approvals_decision SET behavior = 'allow' WHERE id = %s", [rows[2].pk])
        assert "broken in 1 place" in verify()
        assert not verify_row(Decision.objects.get(pk=rows[2].pk))

    def test_it_detects_a_deleted_row(self, ci_bot: Any) -> None:
        rows = decide_some(ci_bot.agent, 5)
        with tamper() as cursor:
            cursor.execute("DELETE FROM approvals_decision WHERE id = %s", [rows[2].pk])
        assert "broken in 1 place" in verify()

    def test_a_hash_function_replaced_in_the_database_shows_as_a_break(self, ci_bot: Any) -> None:
        decide_some(ci_bot.agent, 2)
        forged = "SELECT encode(sha256(convert_to(prev, 'UTF8')), 'hex')"  # leaves the row out
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:  # rolled back with the test's transaction
                cursor.execute(
                    "CREATE OR REPLACE FUNCTION gatehouse_chain_hash(prev text, payload text) RETURNS text"
                    f" LANGUAGE sql AS $$ {forged} $$"
                )
        else:
            connection.connection.create_function("gatehouse_chain_hash", 2, lambda prev, payload: chain_hash(prev, ""))
        try:
            services.request_submit(
                agent=ci_bot.agent, call={"tool_name": "TaskList", "tool_input": {"n": 9}, "tool_use_id": "forged"}
            )
        finally:
            if connection.vendor == "sqlite":
                connection.connection.create_function("gatehouse_chain_hash", 2, chain_hash, deterministic=True)
        assert "broken in 1 place" in verify()

    def test_it_refuses_updates_and_deletes_through_the_orm(self, ci_bot: Any) -> None:
        (row,) = decide_some(ci_bot.agent, 1)
        with pytest.raises(AuditTamperError):
            Decision.objects.filter(pk=row.pk).update(behavior="allow")
        with pytest.raises(AuditTamperError):
            Decision.objects.filter(pk=row.pk).delete()
        with pytest.raises(AuditTamperError):
            row.save()
        with pytest.raises(AuditTamperError):
            row.delete()

    def test_it_refuses_raw_updates_in_the_database(self, ci_bot: Any) -> None:
        (row,) = decide_some(ci_bot.agent, 1)
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("UPDATE approvals_decision SET behavior = 'allow' WHERE id = %s", [row.pk])


@pytest.mark.django_db(transaction=True)
class AuditVerifyExitCodeTests:
    def test_it_exits_0_when_intact_and_1_after_tampering(self, ci_bot: Any) -> None:
        rows = decide_some(ci_bot.agent, 3)
        command = [sys.executable, "manage.py", "audit_verify"]
        intact = subprocess.run(command, cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=60)
        assert intact.returncode == 0, intact.stderr
        assert "3 decisions verified" in intact.stdout
        with tamper() as cursor:
            cursor.execute("UPDATE approvals_decision SET message = 'nothing to see' WHERE id = %s", [rows[1].pk])
        broken = subprocess.run(command, cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=60)
        assert broken.returncode == 1
        assert f"decision {rows[1].pk}: hash does not match" in broken.stderr


@pytest.mark.django_db(transaction=True)
class ConcurrentAppendTests:
    def test_writers_at_once_extend_one_chain_each_row_with_its_search_text_and_request(self, ci_bot: Any) -> None:
        # The lock and the head read go in one message: the head must still be read after
        # the lock is granted, or two writers would read one head and the second be refused.
        def submit(index: int) -> Any:
            try:
                call = {"tool_name": "TaskList", "tool_input": {"n": index}, "tool_use_id": f"at_once_{index}"}
                return services.request_submit(agent=ci_bot.agent, call=call)
            finally:
                connection.close()

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(submit, range(48)))
        assert list(verify_chain()) == []
        assert Decision.objects.count() == 48
        for result in results:
            assert PermissionRequest.objects.get(pk=result.request.pk).decision_id == result.decision.pk
            search = AuditSearch.objects.get(decision_id=result.decision.pk)
            assert search.text.startswith("tasklist")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.django_db
class ChainHashFunctionTests:
    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(prev=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64), payload=JSON)
    def test_the_database_hashes_a_row_as_python_does(self, prev: str, payload: Any) -> None:
        # Appends hash in the database (PostgreSQL: SQL, migration 0025); verification in Python.
        text = canonical_json(payload)
        with connection.cursor() as cursor:
            cursor.execute("SELECT gatehouse_chain_hash(%s, %s)", [prev, text])
            (got,) = cursor.fetchone()
        assert got == chain_hash(prev, text)
