"""`manage.py run_sweeper`: expire overdue asks from the database, on its own schedule."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections

from relay.sweeper import sweep_once


class Command(BaseCommand):
    help = "Deny (reason 'timeout') every pending request past its deadline; repeat every --interval seconds."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="sweep once and exit")
        parser.add_argument("--interval", type=float, default=float(settings.GATEHOUSE_SWEEP_INTERVAL))

    def handle(self, *args: Any, **options: Any) -> None:
        while True:
            close_old_connections()
            expired = sweep_once()
            while expired >= 100:  # a backlog: keep going before resting
                expired = sweep_once()
            if options["once"]:
                self.stdout.write(f"expired {expired} overdue request(s)")
                return
            time.sleep(options["interval"])
