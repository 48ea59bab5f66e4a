"""Signed checkpoints of the chain's head, outside the database: a cut tail is found."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from approvals import services
from approvals.checkpoints import CheckpointError, CheckpointWriter, load_private_key
from approvals.models import Decision
from tests.approvals.audit_helpers import tamper
from tests.approvals.test_audit_chain import decide_some
from tests.live import ROOT, server_env


@pytest.fixture
def keys(tmp_path: Path, settings: Any) -> dict[str, Path]:
    """A key pair made by `audit_keygen`, configured as an operator would."""
    paths = {"private": tmp_path / "checkpoint.key", "public": tmp_path / "checkpoint.pub"}
    call_command("audit_keygen", private=str(paths["private"]), public=str(paths["public"]), stdout=io.StringIO())
    paths["file"] = tmp_path / "checkpoints.jsonl"
    settings.GATEHOUSE_CHECKPOINT_KEY_FILE = str(paths["private"])
    settings.GATEHOUSE_CHECKPOINT_PUBLIC_KEY_FILE = str(paths["public"])
    settings.GATEHOUSE_CHECKPOINT_FILE = paths["file"]
    return paths


def verify() -> tuple[str, str]:
    """(stdout, error) of audit_verify; error is "" when everything holds."""
    out = io.StringIO()
    try:
        call_command("audit_verify", stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        return out.getvalue(), str(exc)
    return out.getvalue(), ""


def checkpoint() -> None:
    call_command("audit_checkpoint", stdout=io.StringIO())


@pytest.mark.django_db
class AuditCheckpointTests:
    def test_it_verifies_an_untouched_chain_against_its_checkpoints(self, ci_bot: Any, keys: dict[str, Path]) -> None:
        decide_some(ci_bot.agent, 3)
        checkpoint()
        out, error = verify()
        assert error == ""
        assert "checkpoints: 1 verified" in out
        assert oct(keys["private"].stat().st_mode & 0o777) == "0o600"

    def test_it_finds_the_newest_rows_deleted_after_a_checkpoint(self, ci_bot: Any, keys: dict[str, Path]) -> None:
        rows = decide_some(ci_bot.agent, 5)
        checkpoint()
        with tamper() as cursor:
            cursor.execute("DELETE FROM approvals_decision WHERE id >= %s", [rows[3].pk])
        _, error = verify()
        assert "broken" in error
        assert error != ""

    def test_it_finds_a_truncated_table(self, ci_bot: Any, keys: dict[str, Path]) -> None:
        decide_some(ci_bot.agent, 3)
        checkpoint()
        with tamper() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("TRUNCATE approvals_decision CASCADE")
            else:
                cursor.execute("DELETE FROM approvals_decision")
        assert verify()[1] != ""

    def test_it_finds_a_chain_rewritten_from_the_checkpointed_row(self, ci_bot: Any, keys: dict[str, Path]) -> None:
        rows = decide_some(ci_bot.agent, 3)
        checkpoint()
        with tamper() as cursor:
            cursor.execute("UPDATE approvals_decision SET hash = %s WHERE id = %s", ["f" * 64, rows[2].pk])
        _, error = verify()
        assert error != ""

    def test_it_finds_a_forged_checkpoint(self, ci_bot: Any, keys: dict[str, Path], tmp_path: Path) -> None:
        decide_some(ci_bot.agent, 2)
        checkpoint()
        line = json.loads(keys["file"].read_text())
        variants = [
            {**line, "sig": base64.b64encode(b"\0" * 64).decode()},  # a made-up signature
            {**line, "rows": line["rows"] + 1},  # a signed line edited
            {**line, "sig": "not base64!"},
            {key: value for key, value in line.items() if key != "sig"},
        ]
        call_command("audit_keygen", private=str(tmp_path / "other.key"), public=str(tmp_path / "other.pub"))
        other = load_private_key(tmp_path / "other.key")
        body = {key: line[key] for key in ("v", "head_id", "head_hash", "rows", "at")}
        from approvals.audit import canonical_json

        other_sig = base64.b64encode(other.sign(canonical_json(body).encode())).decode()
        variants.append({**line, "sig": other_sig})  # signed, but by another key
        for variant in variants:
            keys["file"].write_text(json.dumps(variant) + "\n")
            _, error = verify()
            assert "broken in 1 place" in error, variant
        keys["file"].write_text("{not json\n")
        assert verify()[1] != ""

    def test_it_says_plainly_when_checkpoints_are_not_configured(self, ci_bot: Any, settings: Any) -> None:
        settings.GATEHOUSE_CHECKPOINT_PUBLIC_KEY_FILE = ""
        decide_some(ci_bot.agent, 1)
        out, error = verify()
        assert error == ""
        assert "checkpoints: not configured" in out and "cannot be detected" in out

    def test_it_fails_when_configured_but_no_checkpoint_exists(self, ci_bot: Any, keys: dict[str, Path]) -> None:
        decide_some(ci_bot.agent, 1)
        _, error = verify()
        assert "broken in 1 place" in error

    def test_it_refuses_a_private_key_others_may_read(self, keys: dict[str, Path]) -> None:
        os.chmod(keys["private"], 0o640)
        with pytest.raises(CheckpointError, match="chmod 600"):
            load_private_key(keys["private"])
        with pytest.raises(CommandError, match="chmod 600"):
            checkpoint()

    def test_it_refuses_to_overwrite_a_key(self, keys: dict[str, Path]) -> None:
        with pytest.raises(CommandError, match="exists"):
            call_command("audit_keygen", private=str(keys["private"]), public=str(keys["public"]) + ".new")

    def test_it_verifies_checkpoints_across_an_archive_cut(
        self, ci_bot: Any, keys: dict[str, Path], tmp_path: Path
    ) -> None:
        decide_some(ci_bot.agent, 3)
        checkpoint()
        call_command("audit_archive", before="2999-01-01", dir=str(tmp_path / "archive"), stdout=io.StringIO())
        assert not Decision.objects.exists()
        assert verify()[1] == ""  # the checkpointed row is archived, not cut


@pytest.mark.django_db
class CheckpointScheduleTests:
    def test_it_writes_first_then_every_n_rows_or_m_minutes(self, ci_bot: Any, keys: dict[str, Path]) -> None:
        from datetime import timedelta

        from django.utils import timezone

        writer = CheckpointWriter(load_private_key(keys["private"]), keys["file"], rows=3, minutes=10)
        assert writer.maybe_write()  # the first pass anchors at once
        decide_some(ci_bot.agent, 2)
        assert not writer.maybe_write()
        services.request_submit(agent=ci_bot.agent, call={"tool_name": "TaskList", "tool_use_id": "third"})
        assert writer.maybe_write()  # three new rows
        assert not writer.due(0, timezone.now())
        assert writer.due(0, timezone.now() + timedelta(minutes=10))
        assert len(keys["file"].read_text().splitlines()) == 2
        assert verify()[1] == ""


@pytest.mark.django_db(transaction=True)
class SweeperCheckpointTests:
    def test_the_sweeper_process_writes_a_checkpoint_audit_verify_accepts(
        self, ci_bot: Any, keys: dict[str, Path]
    ) -> None:
        rows = decide_some(ci_bot.agent, 2)
        env = server_env(
            GATEHOUSE_CHECKPOINT_KEY_FILE=str(keys["private"]),
            GATEHOUSE_CHECKPOINT_PUBLIC_KEY_FILE=str(keys["public"]),
            GATEHOUSE_CHECKPOINT_FILE=str(keys["file"]),
        )
        swept = subprocess.run(
            [sys.executable, "manage.py", "run_sweeper", "--once"], cwd=ROOT, env=env, capture_output=True, timeout=60
        )
        assert swept.returncode == 0, swept.stderr
        line = json.loads(keys["file"].read_text())
        assert (line["head_id"], line["head_hash"], line["rows"]) == (rows[-1].pk, rows[-1].hash, 2)
        command = [sys.executable, "manage.py", "audit_verify"]
        intact = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert intact.returncode == 0, intact.stderr
        assert "checkpoints: 1 verified" in intact.stdout
        with tamper() as cursor:
            cursor.execute("DELETE FROM approvals_decision WHERE id = %s", [rows[-1].pk])
        cut = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert cut.returncode == 1
        assert f"decision {rows[-1].pk} is gone" in cut.stderr
        assert Decision.objects.count() == 1


@pytest.mark.django_db
class UnanchoredWindowTests:
    """The rows after the newest checkpoint are the one window a cut goes unseen: it is
    reported, and a window that stays open (no sweeper) fails verification."""

    @pytest.mark.parametrize(
        ("rows_after", "minutes_later", "fails"),
        [
            (0, 0, False),
            (0, 60, False),  # nothing written since: nothing to anchor
            (2, 0, False),
            (2, 2, False),
            (2, 4, True),  # past 2 x 1 min + 1 min with rows waiting
            (1, 60 * 24, True),
        ],
    )
    def test_it_reports_the_rows_after_the_newest_checkpoint_and_fails_a_stale_window(
        self, ci_bot: Any, keys: dict[str, Path], settings: Any, rows_after: int, minutes_later: int, fails: bool
    ) -> None:
        from datetime import timedelta

        from django.utils import timezone

        from approvals.checkpoints import verify_checkpoints

        settings.GATEHOUSE_CHECKPOINT_MINUTES = 1
        decide_some(ci_bot.agent, 2)
        checkpoint()
        for n in range(rows_after):  # new tool_use_ids: decide_some's would replay the first rows
            call = {"tool_name": "TaskList", "tool_input": {"n": n}, "tool_use_id": f"after_{n}"}
            assert services.request_submit(agent=ci_bot.agent, call=call).decision is not None
        report = verify_checkpoints(now=timezone.now() + timedelta(minutes=minutes_later))
        assert f"{rows_after} rows since, not yet anchored" in report.summary
        assert f"({minutes_later} min ago)" in report.summary
        assert bool(report.problems) is fails, report.problems
        if fails:
            assert "is the sweeper writing checkpoints" in report.problems[0]

    def test_the_default_schedule_keeps_the_window_short(self) -> None:
        from django.conf import settings

        assert settings.GATEHOUSE_CHECKPOINT_ROWS <= 100 and settings.GATEHOUSE_CHECKPOINT_MINUTES <= 1
