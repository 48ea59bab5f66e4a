"""`manage.py adduser NAME --team TEAM --role viewer|approver|admin`: a person in a team.

With `--password-stdin` the password is read from standard input (one line); without
it, a new person gets a one-time link, printed on the last line, where they set their own.
"""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals import selectors, services
from approvals.models import Role


class Command(BaseCommand):
    help = "Add a person to a team with a role; print a one-time login link unless --password-stdin is given."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--team", default="default", help="Team name (default: default).")
        parser.add_argument("--role", choices=Role.values, default=Role.VIEWER, help="Role in the team.")
        parser.add_argument("--email", default="", help="Email address (optional).")
        parser.add_argument(
            "--password-stdin", action="store_true", help="Read the password from standard input, one line."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        team = selectors.team_by_name(options["team"])
        if team is None:
            raise CommandError(f"no team named {options['team']!r}")
        password = None
        if options["password_stdin"]:
            password = sys.stdin.readline().rstrip("\r\n")
            if not password:
                raise CommandError("--password-stdin: standard input held no password")
        try:
            user = services.person_add(
                username=options["username"], team=team, role=options["role"], email=options["email"], password=password
            )
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{user.get_username()} is {options['role']} in team {team.name!r}.")
        if password is None and not user.has_usable_password():
            days = settings.PASSWORD_RESET_TIMEOUT // 86_400
            self.stdout.write(f"Send them this one-time link to set their password (it works once, for {days} days):")
            self.stdout.write(services.person_login_link(user=user))
