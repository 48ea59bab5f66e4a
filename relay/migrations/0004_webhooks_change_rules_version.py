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

from importlib import import_module

from django.db import migrations

RULES = import_module("approvals.migrations.0004_rules_version")

# The rules' own trigger function: it sets the version of the row's team (OLD's and NEW's).
POSTGRESQL_CREATE = """
CREATE TRIGGER relay_webhook_changed
    AFTER INSERT OR UPDATE OR DELETE ON relay_webhook
    FOR EACH ROW EXECUTE FUNCTION gatehouse_rules_changed();
"""
POSTGRESQL_DROP = "DROP TRIGGER IF EXISTS relay_webhook_changed ON relay_webhook;"

SQLITE_CREATE = [
    f"CREATE TRIGGER IF NOT EXISTS relay_webhook_inserted AFTER INSERT ON relay_webhook "
    f"BEGIN {RULES.SQLITE_BUMP.format(row='NEW')} END;",
    f"CREATE TRIGGER IF NOT EXISTS relay_webhook_updated AFTER UPDATE ON relay_webhook "
    f"BEGIN {RULES.SQLITE_BUMP.format(row='OLD')} {RULES.SQLITE_BUMP.format(row='NEW')} END;",
    f"CREATE TRIGGER IF NOT EXISTS relay_webhook_deleted AFTER DELETE ON relay_webhook "
    f"BEGIN {RULES.SQLITE_BUMP.format(row='OLD')} END;",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS relay_webhook_inserted;",
    "DROP TRIGGER IF EXISTS relay_webhook_updated;",
    "DROP TRIGGER IF EXISTS relay_webhook_deleted;",
]


def run(statements):
    """An operation running each engine's statements (none on another engine)."""

    def operation(apps, schema_editor):
        for statement in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement, params=None)

    return operation


class Migration(migrations.Migration):
    dependencies = [("relay", "0003_push"), ("approvals", "0004_rules_version")]
    operations = [
        migrations.RunPython(
            run({"postgresql": [POSTGRESQL_CREATE], "sqlite": SQLITE_CREATE}),
            run({"postgresql": [POSTGRESQL_DROP], "sqlite": SQLITE_DROP}),
        )
    ]
