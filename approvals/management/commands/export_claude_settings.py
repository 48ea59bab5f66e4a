"""`manage.py export_claude_settings [--team TEAM] [--source S ...] [--output FILE]`.

Writes the team's rules back in Claude Code's settings shape (`permissions.allow/deny/
ask`). With `--output`, only the file's `permissions` lists are replaced; its other
keys (hooks, env, model) stay as they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q
from django.utils import timezone

from agent.install import write_settings
from approvals.management.commands.install_claude_hooks import read_settings
from approvals.models import Rule, RuleScope, RuleSource, Team
from policy.settings import export_settings


class Command(BaseCommand):
    help = "Export the team's rules as a Claude Code settings document."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", default="default", help="team name (default: default)")
        parser.add_argument("--source", nargs="+", choices=RuleSource.values, help="only rules of these sources")
        parser.add_argument("--output", default="", help="settings file to update (default: print to stdout)")

    def handle(self, *args: Any, **options: Any) -> None:
        team = Team.objects.filter(name=options["team"]).first()
        if team is None:
            raise CommandError(f"no team named {options['team']!r}")
        # Only team-wide, unexpired rules: session, agent and project grants have no
        # place in a settings file that applies to every session.
        rules = Rule.objects.filter(team=team, scope=RuleScope.GLOBAL).filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
        )
        if options["source"]:
            rules = rules.filter(source__in=options["source"])
        exported = export_settings({"rule": r.rule, "behavior": r.behavior} for r in rules.order_by("id"))
        if not options["output"]:
            self.stdout.write(json.dumps(exported, indent=2))
            return
        path = Path(options["output"]).expanduser()
        doc = read_settings(path)
        current = doc.get("permissions")
        permissions: dict[str, Any] = current if isinstance(current, dict) else {}
        doc["permissions"] = {**permissions, **exported["permissions"]}
        write_settings(path, doc)
        count = sum(len(v) for k, v in exported["permissions"].items() if isinstance(v, list))
        self.stdout.write(f"Wrote {count} rule(s) to {path}.")
