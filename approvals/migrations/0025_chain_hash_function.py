"""The audit chain's hash as a database function: an append computes it from the head it reads.

`gatehouse_chain_hash(prev, payload)` is `approvals.audit.chain_hash`: SHA-256 (hex) of
the previous row's hash, a newline and the row's canonical JSON, encoded as UTF-8.
PostgreSQL gets it here, in SQL; SQLite gets the Python function on every connection
(approvals.apps), so this migration does nothing there.
"""

from typing import Any

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION gatehouse_chain_hash(prev text, payload text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT encode(sha256(convert_to(prev || chr(10) || payload, 'UTF8')), 'hex') $$
"""
DROP = "DROP FUNCTION IF EXISTS gatehouse_chain_hash(text, text)"


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0024_audit_kind_autopilot"),
    ]

    operations = [migrations.RunPython(create, drop)]
