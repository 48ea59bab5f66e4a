"""`manage.py run_sweeper`: expire overdue asks from the database, on its own schedule.

With `GATEHOUSE_CHECKPOINT_KEY_FILE` set it also signs checkpoints of the audit chain's
head (approvals.checkpoints): the sweeper is the process that holds that key.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections

from approvals.checkpoints import CheckpointError, CheckpointWriter, checkpoint_writer
from relay.sweeper import sweep_once

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Deny (reason 'timeout') every pending request past its deadline; repeat every --interval seconds."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="sweep once and exit")
        parser.add_argument("--interval", type=float, default=float(settings.GATEHOUSE_SWEEP_INTERVAL))

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            checkpoints = checkpoint_writer()
        except CheckpointError as exc:
            raise CommandError(str(exc)) from None  # a configured key that cannot be used: say so at start
        while True:
            close_old_connections()
            expired = sweep_once()
            while expired >= 100:  # a backlog: keep going before resting
                expired = sweep_once()
            self.checkpoint(checkpoints)
            if options["once"]:
                self.stdout.write(f"expired {expired} overdue request(s)")
                return
            time.sleep(options["interval"])

    def checkpoint(self, checkpoints: CheckpointWriter | None) -> None:
        if checkpoints is None:
            return
        try:
            checkpoints.maybe_write()
        except OSError:
            # Expiring asks matters more than one missed checkpoint; the next pass retries.
            log.exception("audit checkpoint: cannot write %s", checkpoints.path)
