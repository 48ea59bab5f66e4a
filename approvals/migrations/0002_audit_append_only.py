"""On PostgreSQL the audit log is append-only in the database too, not just in the ORM.

TRUNCATE stays possible (test runs and `manage.py flush` use it); the hash chain makes a
truncated-and-rewritten log detectable only against an exported copy, see SECURITY.md.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION gatehouse_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: % on approvals_decision refused', TG_OP;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER approvals_decision_append_only
    BEFORE UPDATE OR DELETE ON approvals_decision
    FOR EACH ROW EXECUTE FUNCTION gatehouse_audit_append_only();
"""

DROP = """
DROP TRIGGER IF EXISTS approvals_decision_append_only ON approvals_decision;
DROP FUNCTION IF EXISTS gatehouse_audit_append_only();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE, params=None)  # no params: its % is PL/pgSQL, not a placeholder


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
