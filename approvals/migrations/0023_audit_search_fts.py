"""SQLite: an FTS5 trigram index of the audit log's search text (approvals.audit_search).

PostgreSQL serves the search's `LIKE '%text%'` from its trigram index (0008). On SQLite
this adds an FTS5 table with the `trigram` tokenizer (SQLite 3.34 or later), over the
search table as its external content: triggers keep it in step with every write to that
table (a new audit row, the archive's delete, a rebuild), and `rebuild` indexes the rows
already there. `case_sensitive 1`: the text and the query are folded in Python already, so
the index matches exactly the substrings `LIKE` does. A SQLite built without FTS5 or the
trigram tokenizer gets nothing here, and its searches scan the table as before.
"""

from typing import Any

from django.db import migrations, transaction
from django.db.utils import DatabaseError

FTS = "approvals_auditsearch_fts"  # approvals.audit_search.FTS_TABLE
# Spelled out, not built from FTS: a migration's SQL stays as it shipped.
CREATE = [
    "CREATE VIRTUAL TABLE approvals_auditsearch_fts USING fts5(text, content='approvals_auditsearch', "
    "content_rowid='decision_id', tokenize='trigram case_sensitive 1')",
    "CREATE TRIGGER approvals_auditsearch_fts_insert AFTER INSERT ON approvals_auditsearch BEGIN "
    "INSERT INTO approvals_auditsearch_fts(rowid, text) VALUES (new.decision_id, new.text); END",
    "CREATE TRIGGER approvals_auditsearch_fts_delete AFTER DELETE ON approvals_auditsearch BEGIN "
    "INSERT INTO approvals_auditsearch_fts(approvals_auditsearch_fts, rowid, text) "
    "VALUES ('delete', old.decision_id, old.text); END",
    "CREATE TRIGGER approvals_auditsearch_fts_update AFTER UPDATE ON approvals_auditsearch BEGIN "
    "INSERT INTO approvals_auditsearch_fts(approvals_auditsearch_fts, rowid, text) "
    "VALUES ('delete', old.decision_id, old.text); "
    "INSERT INTO approvals_auditsearch_fts(rowid, text) VALUES (new.decision_id, new.text); END",
    "INSERT INTO approvals_auditsearch_fts(approvals_auditsearch_fts) VALUES ('rebuild')",
]
DROP = [
    "DROP TRIGGER IF EXISTS approvals_auditsearch_fts_insert",
    "DROP TRIGGER IF EXISTS approvals_auditsearch_fts_delete",
    "DROP TRIGGER IF EXISTS approvals_auditsearch_fts_update",
    "DROP TABLE IF EXISTS approvals_auditsearch_fts",
]


def create(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    if connection.vendor != "sqlite":
        return
    try:
        with transaction.atomic(using=connection.alias):
            with connection.cursor() as cursor:
                cursor.execute(f"CREATE VIRTUAL TABLE temp.{FTS}_probe USING fts5(text, tokenize='trigram')")
                cursor.execute(f"DROP TABLE temp.{FTS}_probe")
    except DatabaseError:  # no FTS5, or a SQLite older than 3.34: searches scan the table
        return
    with connection.cursor() as cursor:
        for statement in CREATE:
            cursor.execute(statement)


def drop(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        for statement in DROP:
            cursor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0022_request_agent_pending"),
    ]

    operations = [
        migrations.RunPython(create, drop),
    ]
