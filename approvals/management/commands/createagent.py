"""`manage.py createagent NAME [--mode MODE] [--team TEAM] [--root PATH]... [--home PATH]`.

Prints the token on its last line.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals import services
from approvals.models import Mode, Team


class Command(BaseCommand):
    help = "Register an agent and print its bearer token (shown once) on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--mode", default=Mode.DEFAULT, choices=Mode.values)
        parser.add_argument("--team", default="default", help="team name (default: default)")
        parser.add_argument(
            "--root",
            action="append",
            default=[],
            help="pin a project root on the agent's machine (repeatable): a call from a cwd outside asks",
        )
        parser.add_argument("--home", default="", help="pin the agent's home directory (overrides the reported one)")

    def handle(self, *args: Any, **options: Any) -> None:
        team, _ = Team.objects.get_or_create(name=options["team"])
        try:
            agent, token = services.agent_create(
                name=options["name"], team=team, mode=options["mode"], roots=options["root"], home=options["home"]
            )
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"Agent {agent.name!r} registered in team {team.name!r} (mode {agent.default_mode}).")
        self.stdout.write(token)
