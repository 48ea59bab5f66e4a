"""The audit log's search table (approvals.audit_search), filled for existing rows.

On PostgreSQL a trigram GIN index (`pg_trgm`, shipped with PostgreSQL's contrib and a
trusted extension since PostgreSQL 13) serves `LIKE '%text%'` on the folded search text.
SQLite has no such index: its search scans the table, which is fine at its scale.
"""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

from approvals.audit_search import search_text

BATCH = 2000
TRIGRAM_INDEX = "CREATE INDEX IF NOT EXISTS audit_search_trgm ON approvals_auditsearch USING gin (text gin_trgm_ops)"


def fill(apps: Any, schema_editor: Any) -> None:
    """A search row for every audit row written before this table existed."""
    decision_model = apps.get_model("approvals", "Decision")
    search_model = apps.get_model("approvals", "AuditSearch")
    rows = decision_model.objects.using(schema_editor.connection.alias).order_by("id")
    last = 0
    while True:
        batch = list(
            rows.filter(id__gt=last).values_list("id", "tool_name", "request__tool_input", "message", "rule")[:BATCH]
        )
        if not batch:
            return
        search_model.objects.using(schema_editor.connection.alias).bulk_create(
            search_model(decision_id=pk, text=search_text(tool, tool_input, message=message, rule=rule))
            for pk, tool, tool_input, message, rule in batch
        )
        last = batch[-1][0]


def trigram_index(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        schema_editor.execute(TRIGRAM_INDEX)


def drop_trigram_index(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS audit_search_trgm")


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0007_learning_autopilot"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditSearch",
            fields=[
                (
                    "decision",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="search",
                        serialize=False,
                        to="approvals.decision",
                    ),
                ),
                ("text", models.TextField()),
            ],
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.RunPython(trigram_index, drop_trigram_index),
    ]
