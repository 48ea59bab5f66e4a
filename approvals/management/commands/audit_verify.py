"""`manage.py audit_verify`: check the audit log's hash chain; exit 1 on any break."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from approvals.audit import verify_chain
from approvals.models import Decision


class Command(BaseCommand):
    help = "Verify the audit log's hash chain and report every row that was edited, removed or re-ordered."

    def handle(self, *args: Any, **options: Any) -> None:
        breaks = list(verify_chain())
        for problem in breaks:
            self.stderr.write(f"decision {problem.decision_id}: {problem.problem}")
        if breaks:
            raise CommandError(f"audit chain broken in {len(breaks)} place(s)")
        self.stdout.write(f"audit chain intact: {Decision.objects.count()} decisions verified")
