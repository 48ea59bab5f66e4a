"""The decision's fence, checked inside the message that writes the decision's audit row.

On PostgreSQL a person's decision sends the fence (the conditional update of the pending
request) in the same message as its audit row (approvals.services.decide).
`gatehouse_fence_held(moved)` is that message's check: unless the fence moved exactly one
row, it raises SQLSTATE `GH409`, and the whole message, its implicit transaction, rolls
back; nothing after the fence is written. SQLite runs the fence as a statement of its
own and reads its row count, so this migration does nothing there.
"""

from typing import Any

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION gatehouse_fence_held(moved bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF moved IS DISTINCT FROM 1 THEN
        RAISE EXCEPTION 'the request is no longer pending (someone else decided it, or its deadline passed)'
            USING ERRCODE = 'GH409';
    END IF;
    RETURN moved;
END
$$
"""
DROP = "DROP FUNCTION IF EXISTS gatehouse_fence_held(bigint)"


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0026_people_allows_index"),
    ]

    operations = [migrations.RunPython(create, drop)]
