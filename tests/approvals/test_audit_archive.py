"""`audit_archive --before DATE` moves old rows to compressed JSONL; archive + live table verify as one chain."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from approvals.models import AuditCut, Decision, PermissionRequest
from tests.approvals.audit_helpers import tamper
from tests.approvals.test_audit_chain import decide_some


def archive(before: str, directory: Path) -> str:
    out = io.StringIO()
    call_command("audit_archive", "--before", before, "--dir", str(directory), stdout=out, stderr=io.StringIO())
    return out.getvalue()


def verify(directory: Path | None = None) -> str:
    """Run audit_verify (with the archives when given); return its error, or "" if intact."""
    options = ["--archives", str(directory)] if directory else []
    try:
        call_command("audit_verify", *options, stdout=io.StringIO(), stderr=io.StringIO())
    except CommandError as exc:
        return str(exc)
    return ""


def archived_lines(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@pytest.mark.django_db
class AuditArchiveTests:
    def test_it_moves_old_rows_and_both_parts_still_verify(self, ci_bot: Any, tmp_path: Path) -> None:
        rows = decide_some(ci_bot.agent, 6)
        said = archive(rows[3].created_at.isoformat(), tmp_path)
        assert "archived 3 decisions" in said
        assert list(Decision.objects.order_by("id").values_list("pk", flat=True)) == [r.pk for r in rows[3:]]
        assert not PermissionRequest.objects.filter(pk__in=[r.request_id for r in rows[:3]]).exists()
        cut = AuditCut.objects.get()
        assert (cut.first_id, cut.through_id, cut.rows, cut.head_hash) == (rows[0].pk, rows[2].pk, 3, rows[2].hash)
        header, *lines = archived_lines(tmp_path / cut.file_name)
        assert header["start_hash"] == "0" * 64
        assert [line["id"] for line in lines] == [r.pk for r in rows[:3]]
        assert lines[0]["request"]["tool_name"] == "TaskList"  # the request travels with its decision
        assert verify() == "" and verify(tmp_path) == ""
        decide_some(ci_bot.agent, 1)  # appends go on after the cut
        assert verify(tmp_path) == ""

    def test_it_continues_the_chain_after_archiving_everything(self, ci_bot: Any, tmp_path: Path) -> None:
        rows = decide_some(ci_bot.agent, 3)
        archive("2999-01-01", tmp_path)
        archive("2999-01-01", tmp_path)  # nothing left: no second cut
        assert Decision.objects.count() == 0 and AuditCut.objects.count() == 1
        with transaction.atomic():
            later = decide_some(ci_bot.agent, 1)[0]
        assert later.prev_hash == rows[-1].hash
        assert verify(tmp_path) == ""

    def test_it_chains_one_archive_onto_the_next(self, ci_bot: Any, tmp_path: Path) -> None:
        rows = decide_some(ci_bot.agent, 4)
        archive(rows[2].created_at.isoformat(), tmp_path)
        archive("2999-01-01", tmp_path)
        first, second = AuditCut.objects.order_by("through_id")
        assert second.start_hash == first.head_hash
        assert verify(tmp_path) == ""

    def test_it_detects_an_edited_archive(self, ci_bot: Any, tmp_path: Path) -> None:
        decide_some(ci_bot.agent, 3)
        archive("2999-01-01", tmp_path)
        path = tmp_path / AuditCut.objects.get().file_name
        header, *lines = archived_lines(path)
        decision = lines[1]["fields"]["decision"]
        decision["behavior"] = "allow" if decision["behavior"] == "deny" else "deny"
        with gzip.open(path, "wt", encoding="utf-8") as out:
            out.writelines(json.dumps(row) + "\n" for row in (header, *lines))
        problem = verify(tmp_path)
        assert "broken in 2 place(s)" in problem  # the file's digest, and the edited row
        assert verify() == ""  # the live table alone knows nothing of the files

    def test_it_detects_an_edited_request_in_an_archive(self, ci_bot: Any, tmp_path: Path) -> None:
        decide_some(ci_bot.agent, 3)
        archive("2999-01-01", tmp_path)
        path = tmp_path / AuditCut.objects.get().file_name
        header, *lines = archived_lines(path)
        assert lines[1]["format"] == 3
        lines[1]["fields"]["request"]["tool_input"] = {"command": "true"}
        with gzip.open(path, "wt", encoding="utf-8") as out:
            out.writelines(json.dumps(row) + "\n" for row in (header, *lines))
        assert "broken in 2 place(s)" in verify(tmp_path)

    def test_it_detects_a_missing_archive(self, ci_bot: Any, tmp_path: Path) -> None:
        decide_some(ci_bot.agent, 2)
        archive("2999-01-01", tmp_path)
        (tmp_path / AuditCut.objects.get().file_name).unlink()
        assert "broken in 1 place" in verify(tmp_path)

    def test_it_detects_live_rows_removed_after_the_cut(self, ci_bot: Any, tmp_path: Path) -> None:
        rows = decide_some(ci_bot.agent, 5)
        archive(rows[2].created_at.isoformat(), tmp_path)
        with tamper() as cursor:
            cursor.execute("DELETE FROM approvals_decision WHERE id = %s", [rows[2].pk])
        assert "broken in 1 place" in verify(tmp_path)

    def test_it_refuses_to_archive_a_broken_chain(self, ci_bot: Any, tmp_path: Path) -> None:
        rows = decide_some(ci_bot.agent, 4)
        with tamper() as cursor:
            cursor.execute("UPDATE approvals_decision SET message = 'edited' WHERE id = %s", [rows[1].pk])
        with pytest.raises(CommandError, match=f"decision {rows[1].pk} does not verify"):
            archive("2999-01-01", tmp_path)
        assert Decision.objects.count() == 4 and not AuditCut.objects.exists()
        assert not list(tmp_path.glob("audit-*"))

    @pytest.mark.parametrize("value", ["yesterday", "2026-13-01", "", "01/02/2026"])
    def test_it_explains_a_bad_date(self, value: str, tmp_path: Path) -> None:
        with pytest.raises(CommandError, match="is not a date"):
            archive(value, tmp_path)


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
class AuditArchiveTriggerTests:
    def test_the_trigger_lets_only_the_archived_prefix_go(self, ci_bot: Any) -> None:
        assert connection.vendor == "postgresql", "run with DATABASE_URL=postgres://… (marker: postgresql)"
        rows = decide_some(ci_bot.agent, 3)
        for through in (None, str(rows[0].pk)):
            with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as c:
                if through:
                    c.execute("SELECT set_config('gatehouse.audit_archive_through', %s, true)", [through])
                c.execute("DELETE FROM approvals_decision WHERE id = %s", [rows[1].pk])
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as c:
            c.execute("SELECT set_config('gatehouse.audit_archive_through', %s, true)", [str(rows[2].pk)])
            c.execute("UPDATE approvals_decision SET message = 'x' WHERE id = %s", [rows[0].pk])
        # SET LOCAL ends with its transaction: the next one is append-only again.
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as c:
            c.execute("DELETE FROM approvals_decision WHERE id = %s", [rows[0].pk])
        assert Decision.objects.count() == 3
