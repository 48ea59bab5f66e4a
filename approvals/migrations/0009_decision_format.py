"""The audit row's hash format: rows written so far keep format 1, new rows are format 2.

Existing rows are not re-hashed under format 2: a re-hash would compute fresh hashes over
whatever their requests hold now, so an edit made before the upgrade would be blessed
rather than found. `approvals.audit.verify_chain` checks each row by its own format.

On SQLite adding a column with a default rebuilds the table, which drops its triggers:
the UPDATE guard of migration 0003 is created again afterwards.
"""

from importlib import import_module
from typing import Any

from django.db import migrations, models

SQLITE_GUARD = import_module("approvals.migrations.0003_audit_no_update_sqlite")


def restore_sqlite_guard(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQLITE_GUARD.CREATE)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0008_audit_search")]

    operations = [
        migrations.AddField(
            model_name="decision",
            name="format",
            field=models.PositiveSmallIntegerField(default=1),
        ),
        migrations.AlterField(
            model_name="decision",
            name="format",
            field=models.PositiveSmallIntegerField(default=2),
        ),
        migrations.RunPython(restore_sqlite_guard, migrations.RunPython.noop),
    ]
