"""`manage.py import_claude_settings FILE --source SOURCE [--team TEAM]`: rules from Claude Code.

Reads `permissions.allow/deny/ask` from a Claude Code settings file and stores each as a
team-wide rule of that source. All or nothing: one invalid rule imports none. Rules the
team already has (same text, behaviour and source) are skipped, so a re-import is safe.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from approvals import services
from approvals.models import PERSON_SOURCES, Rule, RuleScope, Team
from policy.rules.parse import RuleSyntaxError
from policy.settings import settings_items


class Command(BaseCommand):
    help = "Import the permissions rules of a Claude Code settings file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="a Claude Code settings.json")
        parser.add_argument("--source", required=True, choices=[value for value, _ in PERSON_SOURCES])
        parser.add_argument("--team", default="default", help="team name (default: default)")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"]).expanduser()
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from None
        if not isinstance(doc, dict) or "permissions" not in doc:
            raise CommandError(f"{path} has no 'permissions' object to import")
        try:
            items = settings_items(doc, options["source"])
        except RuleSyntaxError as exc:
            raise CommandError(f"{path}: {exc}") from None
        team = Team.objects.filter(name=options["team"]).first()
        if team is None:
            raise CommandError(f"no team named {options['team']!r}")
        created = skipped = 0
        with transaction.atomic():
            for item in items:
                if not isinstance(item["rule"], str):
                    raise CommandError(f"permissions.{item['behavior']} holds a non-string: {item['rule']!r}")
                existing = Rule.objects.filter(
                    team=team, scope=RuleScope.GLOBAL, behavior=item["behavior"], source=item["source"]
                )
                try:
                    if existing.filter(rule=item["rule"]).exists():
                        skipped += 1
                        continue
                    services.rule_create(
                        rule=item["rule"],
                        behavior=item["behavior"],
                        source=item["source"],
                        team=team,
                        note=f"Imported from {path.name}",
                    )
                except services.ServiceError as exc:
                    raise CommandError(f"{exc}; nothing was imported") from None
                created += 1
        self.stdout.write(f"Imported {created} rule(s) from {path} as {options['source']}; {skipped} already present.")
