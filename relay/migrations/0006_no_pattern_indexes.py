"""PostgreSQL's pattern-matching copies of a push action token's hash and an ntfy topic's
index, dropped: no query matches their prefix (approvals' migration 0030 says why)."""

from django.db import migrations

PATTERN_INDEXES = (  # (table, index, column), the names Django gave them; PostgreSQL only
    ("relay_ntfytopic", "relay_ntfytopic_topic_e9f71b2a_like", "topic"),
    ("relay_pushactiontoken", "relay_pushactiontoken_token_hash_2ab65f90_like", "token_hash"),
)


def drop_pattern_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for _, index, _ in PATTERN_INDEXES:
            schema_editor.execute(f'DROP INDEX IF EXISTS "{index}"')


def make_pattern_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table, index, column in PATTERN_INDEXES:
            schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ("{column}" varchar_pattern_ops)')


class Migration(migrations.Migration):
    dependencies = [
        ("relay", "0005_keys_indexed_by_their_unique_ones"),
    ]

    operations = [
        migrations.RunPython(drop_pattern_indexes, make_pattern_indexes),
    ]
