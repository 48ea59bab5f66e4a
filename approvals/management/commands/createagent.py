"""`manage.py createagent NAME [--mode MODE] [--team TEAM]`: prints the token on its last line."""

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

    def handle(self, *args: Any, **options: Any) -> None:
        team, _ = Team.objects.get_or_create(name=options["team"])
        try:
            agent, token = services.agent_create(name=options["name"], team=team, mode=options["mode"])
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"Agent {agent.name!r} registered in team {team.name!r} (mode {agent.default_mode}).")
        self.stdout.write(token)
