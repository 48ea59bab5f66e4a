"""`manage.py audit_checkpoint`: sign the audit chain's head now and append it to the checkpoint file."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from approvals.checkpoints import CheckpointError, load_private_key, write_checkpoint


class Command(BaseCommand):
    help = (
        "Append one signed checkpoint of the audit chain's head to GATEHOUSE_CHECKPOINT_FILE, "
        "with the key in GATEHOUSE_CHECKPOINT_KEY_FILE (the sweeper does this on its own schedule)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.GATEHOUSE_CHECKPOINT_KEY_FILE:
            raise CommandError("GATEHOUSE_CHECKPOINT_KEY_FILE is not set: make a key with `manage.py audit_keygen`")
        try:
            line = write_checkpoint(load_private_key(settings.GATEHOUSE_CHECKPOINT_KEY_FILE))
        except CheckpointError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"checkpoint: decision {line['head_id']} ({line['rows']} rows) appended to "
            f"{settings.GATEHOUSE_CHECKPOINT_FILE}"
        )
