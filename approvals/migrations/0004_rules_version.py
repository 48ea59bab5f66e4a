"""The rules version: a trigger sets a new random token on every change to a team's rules.

Server processes cache compiled rules per team and compare this token on each call, so
a new deny rule applies to the very next call in every process, whichever path wrote it.
"""

from django.db import migrations, models

POSTGRESQL_CREATE = """
CREATE OR REPLACE FUNCTION gatehouse_rules_changed() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO approvals_rulesversion (team_id, version) VALUES (OLD.team_id, md5(gen_random_uuid()::text))
        ON CONFLICT (team_id) DO UPDATE SET version = EXCLUDED.version;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO approvals_rulesversion (team_id, version) VALUES (NEW.team_id, md5(gen_random_uuid()::text))
        ON CONFLICT (team_id) DO UPDATE SET version = EXCLUDED.version;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER approvals_rule_changed
    AFTER INSERT OR UPDATE OR DELETE ON approvals_rule
    FOR EACH ROW EXECUTE FUNCTION gatehouse_rules_changed();
"""
POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS approvals_rule_changed ON approvals_rule;
DROP FUNCTION IF EXISTS gatehouse_rules_changed();
"""

SQLITE_BUMP = """
INSERT INTO approvals_rulesversion (team_id, version) VALUES ({row}.team_id, lower(hex(randomblob(16))))
ON CONFLICT (team_id) DO UPDATE SET version = excluded.version;
"""
SQLITE_CREATE = [
    f"CREATE TRIGGER IF NOT EXISTS approvals_rule_inserted AFTER INSERT ON approvals_rule "
    f"BEGIN {SQLITE_BUMP.format(row='NEW')} END;",
    f"CREATE TRIGGER IF NOT EXISTS approvals_rule_updated AFTER UPDATE ON approvals_rule "
    f"BEGIN {SQLITE_BUMP.format(row='OLD')} {SQLITE_BUMP.format(row='NEW')} END;",
    f"CREATE TRIGGER IF NOT EXISTS approvals_rule_deleted AFTER DELETE ON approvals_rule "
    f"BEGIN {SQLITE_BUMP.format(row='OLD')} END;",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS approvals_rule_inserted;",
    "DROP TRIGGER IF EXISTS approvals_rule_updated;",
    "DROP TRIGGER IF EXISTS approvals_rule_deleted;",
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
    dependencies = [("approvals", "0003_audit_no_update_sqlite")]
    operations = [
        migrations.CreateModel(
            name="RulesVersion",
            fields=[
                ("team_id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("version", models.CharField(max_length=32)),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
