"""`manage.py gatehouse_banner`: say at start-up which backends this server uses."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Print which database, claim store and channel layer the server will use."

    def handle(self, *args: Any, **options: Any) -> None:
        engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        self.stdout.write(f"Gatehouse: database {engine}")
        if settings.REDIS_URL:
            self.stdout.write("Gatehouse: Redis claim store and channel layer (several processes may share them)")
        else:
            self.stdout.write(
                "Gatehouse: embedded claim store and in-memory channel layer: single process only; "
                "set REDIS_URL to run several."
            )
