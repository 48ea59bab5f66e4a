"""Indexes the denials monitor reads alone, built without stopping decisions.

On PostgreSQL the indexes are built with CREATE INDEX CONCURRENTLY: a plain CREATE INDEX
would block every audit insert, so every decision, while it reads the whole log. And
autovacuum visits the log every 10,000 new decisions instead of after 20 % of the table:
an index-only scan skips the table only for pages vacuum has marked all-visible, and the
default would leave the newest week of a large log unmarked. Statistics on the rules'
lengths tell the planner how few denials the long-rule index holds.
"""

from typing import Any

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models
from django.db.models.functions import Length
from django.db.models.lookups import GreaterThan, LessThanOrEqual

AUTOVACUUM_SET = (
    "ALTER TABLE approvals_decision SET "
    "(autovacuum_vacuum_insert_threshold = 10000, autovacuum_vacuum_insert_scale_factor = 0)"
)
AUTOVACUUM_RESET = (
    "ALTER TABLE approvals_decision RESET (autovacuum_vacuum_insert_threshold, autovacuum_vacuum_insert_scale_factor)"
)

RULE_CHARS_STATISTICS = "CREATE STATISTICS IF NOT EXISTS decision_rule_chars ON (length(rule)) FROM approvals_decision"
RULE_CHARS_STATISTICS_DROP = "DROP STATISTICS IF EXISTS decision_rule_chars"


class AddIndexOnline(AddIndexConcurrently):
    """CREATE INDEX CONCURRENTLY on PostgreSQL, a plain CREATE INDEX elsewhere."""

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            migrations.AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:
            migrations.AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)


def _on_postgresql(*statements: str) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            for sql in statements:
                schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("approvals", "0004_rules_version"),
    ]

    operations = [
        AddIndexOnline(
            model_name="decision",
            index=models.Index(
                condition=models.Q(("behavior", "deny"), LessThanOrEqual(Length("rule"), 256)),
                fields=["team", "created_at"], include=("tool_name", "agent", "decided_by", "rule"),
                name="decision_denied_short_rule",
            ),
        ),
        AddIndexOnline(
            model_name="decision",
            index=models.Index(
                condition=models.Q(("behavior", "deny"), GreaterThan(Length("rule"), 256)),
                fields=["team", "created_at"], include=("tool_name", "agent", "decided_by"),
                name="decision_denied_long_rule",
            ),
        ),
        AddIndexOnline(
            model_name="decision",
            index=models.Index(
                condition=models.Q(("reason_type__in", ["user", "timeout"])),
                fields=["team", "created_at"], include=("reason_type", "latency_ms"),
                name="decision_team_asked",
            ),
        ),
        migrations.RunPython(
            _on_postgresql(AUTOVACUUM_SET, RULE_CHARS_STATISTICS, "ANALYZE approvals_decision"),
            _on_postgresql(AUTOVACUUM_RESET, RULE_CHARS_STATISTICS_DROP),
        ),
    ]
