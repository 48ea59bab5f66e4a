"""On SQLite the database refuses UPDATE of the audit log too.

DELETE stays possible on SQLite: the test runner's flush empties tables with DELETE
(PostgreSQL's flush uses TRUNCATE, which its row trigger does not see).
"""

from django.db import migrations

CREATE = """
CREATE TRIGGER IF NOT EXISTS approvals_decision_no_update BEFORE UPDATE ON approvals_decision
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only: UPDATE on approvals_decision refused'); END;
"""
DROP = "DROP TRIGGER IF EXISTS approvals_decision_no_update;"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0002_audit_append_only")]
    operations = [migrations.RunPython(forwards, backwards)]
