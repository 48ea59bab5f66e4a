"""`manage.py audit_verify`: check the audit log's hash chain; exit 1 on any break."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.archive import verify_archives
from approvals.audit import verify_chain
from approvals.checkpoints import CheckpointError, verify_checkpoints
from approvals.models import AuditCut, Decision


class Command(BaseCommand):
    help = "Verify the audit log's hash chain and report every row that was edited, removed or re-ordered."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--archives",
            metavar="DIR",
            help="also verify the files audit_archive wrote there, and that they join the live table",
        )
        parser.add_argument(
            "--checkpoints",
            metavar="FILE",
            help="the signed checkpoints to check against (default: GATEHOUSE_CHECKPOINT_FILE), e.g. an off-host copy",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        problems = [f"decision {b.decision_id}: {b.problem}" for b in verify_chain()]
        if options["archives"]:
            problems += list(verify_archives(Path(options["archives"])))
        try:
            anchored = verify_checkpoints(Path(options["checkpoints"]) if options["checkpoints"] else None)
        except CheckpointError as exc:
            raise CommandError(str(exc)) from None
        problems += anchored.problems
        for problem in problems:
            self.stderr.write(problem)
        if problems:
            raise CommandError(f"audit chain broken in {len(problems)} place(s)")
        cut = AuditCut.objects.order_by("-through_id").first()
        since = f", continuing from the archive cut through decision {cut.through_id}" if cut else ""
        archived = (
            f"; {sum(AuditCut.objects.values_list('rows', flat=True))} archived rows verified"
            if options["archives"] and cut
            else ""
        )
        self.stdout.write(f"audit chain intact: {Decision.objects.count()} decisions verified{since}{archived}")
        # Said on every run, so a deployment without checkpoints knows what it cannot see.
        self.stdout.write(anchored.summary)
