"""A change to a team's webhooks gives the team a new rules version, as a rule change does.

What decides a call at submit is the team's rules and its PreToolUse (and, headless,
PermissionRequest) webhooks. Every call reads the team's rules version with what else it
reads first (`approvals.selectors.submit_context`); the webhooks it must ask are kept per
process until that version changes (`relay.webhooks.pre_decision`). So the same triggers
that set it on every change to a rule (approvals migration 0004) set it on every insert,
update and delete of a webhook too, whichever path wrote it: a new deny-on-error webhook
applies to the very next call in every process, and a disabled one is asked no more.

SQLite drops a table's triggers when Django remakes the table (most column changes):
a migration that alters this table must create them again. The tests would say so.
"""

from django.db import migrations

POSTGRESQL_CREATE = """
CREATE TRIGGER relay_webhook_changed
    AFTER INSERT OR UPDATE OR DELETE ON relay_webhook
    FOR EACH ROW EXECUTE FUNCTION gatehouse_rules_changed();
"""
POSTGRESQL_DROP = "DROP TRIGGER IF EXISTS relay_webhook_changed ON relay_webhook;"

SQLITE_BUMP = """
INSERT INTO approvals_rulesversion (team_id, version) VALUES ({row}.team_id, lower(hex(randomblob(16))))
ON CONFLICT (team_id) DO UPDATE SET version = excluded.version;
"""
SQLITE_CREATE = [
    f"CREATE TRIGGER IF NOT EXISTS relay_webhook_inserted AFTER INSERT ON relay_webhook "
    f"BEGIN {SQLITE_BUMP.format(row='NEW')} END;",
    f"CREATE TRIGGER IF NOT EXISTS relay_webhook_updated AFTER UPDATE ON relay_webhook "
    f"BEGIN {SQLITE_BUMP.format(row='OLD')} {SQLITE_BUMP.format(row='NEW')} END;",
    f"CREATE TRIGGER IF NOT EXISTS relay_webhook_deleted AFTER DELETE ON relay_webhook "
    f"BEGIN {SQLITE_BUMP.format(row='OLD')} END;",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS relay_webhook_inserted;",
    "DROP TRIGGER IF EXISTS relay_webhook_updated;",
    "DROP TRIGGER IF EXISTS relay_webhook_deleted;",
]


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(POSTGRESQL_CREATE, params=None)
    elif vendor == "sqlite":
        for statement in SQLITE_CREATE:
            schema_editor.execute(statement)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(POSTGRESQL_DROP, params=None)
    elif vendor == "sqlite":
        for statement in SQLITE_DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("relay", "0003_push"), ("approvals", "0004_rules_version")]
    operations = [migrations.RunPython(forwards, backwards)]
