"""`manage.py audit_archive --before DATE`: move old audit rows to compressed JSONL."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.archive import ArchiveRefused, archive_before


def parse_before(value: str) -> datetime:
    """A date (midnight UTC) or an ISO 8601 timestamp (UTC unless it says otherwise)."""
    try:
        moment = datetime.fromisoformat(value)  # a date alone is midnight
    except ValueError:
        raise CommandError(f"--before: {value!r} is not a date (YYYY-MM-DD) or an ISO 8601 timestamp") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = (
        "Move every audit row older than --before (a prefix of the hash chain) and its request into "
        "audit-<first>-<last>.jsonl.gz, record the cut, and delete the rows; audit_verify goes on from the cut."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--before", required=True, help="archive rows created before this date (UTC)")
        parser.add_argument(
            "--dir",
            default=str(settings.VAR_DIR / "audit-archive"),
            help="where the archive files go (default: var/audit-archive); back this folder up",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        before = parse_before(options["before"])
        try:
            result = archive_before(before, Path(options["dir"]))
        except ArchiveRefused as exc:
            raise CommandError(str(exc)) from None
        if result.cut is None:
            self.stdout.write(f"nothing to archive before {before.isoformat()}")
            return
        cut = result.cut
        self.stdout.write(
            f"archived {cut.rows} decisions ({cut.first_id}..{cut.through_id}) to {result.path}; "
            f"the live chain continues from {cut.head_hash}"
        )
