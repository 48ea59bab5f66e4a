"""`manage.py createtoken USERNAME`: a personal API token, printed on the last line."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals import services


class Command(BaseCommand):
    help = "Create a personal API token for a person and print it (shown once) on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user named {options['username']!r}")
        self.stdout.write(services.personal_token_create(user=user))
