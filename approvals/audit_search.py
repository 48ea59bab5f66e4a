"""What the audit log's search reads: one lowercase text per row, the same on every database.

`GET /api/v1/audit?q=TEXT` and the audit page's search box find rows whose command,
target (path, URL, pattern…), rule or message contains TEXT, ignoring case. SQLite's
`LIKE` and `lower()` fold ASCII letters only, PostgreSQL's fold all of Unicode: so the
text is case-folded here, in Python, once when the row is written (`AuditSearch`), the
query is folded the same way, and both databases run a plain substring `LIKE` on already
folded text. That gives the same hits on both. PostgreSQL serves the `LIKE` from a
trigram index (`pg_trgm`, migration 0008). SQLite serves a query of 3 or more characters
from an FTS5 `trigram` table over the search table (migration 0023): a phrase of the
folded query, matched case-sensitively, finds exactly the rows `LIKE` does. A shorter
query (a trigram needs 3 characters), or a SQLite without FTS5 trigram (before 3.34),
scans the search table with the same `LIKE`.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

# Each input value and the message are cut to this many characters: a search finds
# commands, paths and URLs, not the body of a 1 MiB Write.
VALUE_CHARS = 2000
SEPARATOR = "\n"


def fold(text: str) -> str:
    """Case-folded text: what both sides of a search are compared in."""
    return text.casefold()


def search_text(tool_name: str, tool_input: Any, *, message: str, rule: str) -> str:
    """The folded text a row is found by: the tool, every string of its input, the rule, the message."""
    parts = [tool_name]
    if isinstance(tool_input, dict):
        for value in tool_input.values():
            if isinstance(value, str):
                parts.append(value[:VALUE_CHARS])
    parts += [rule[:VALUE_CHARS], message[:VALUE_CHARS]]
    return fold(SEPARATOR.join(part for part in parts if part))


# SQLite's FTS5 trigram index of the search text (migration 0023), and the shortest query
# it can serve.
FTS_TABLE = "approvals_auditsearch_fts"
TRIGRAM = 3
# The ids of the rows whose folded text holds the phrase (the only parameter).
FTS_MATCH = "SELECT rowid FROM approvals_auditsearch_fts WHERE approvals_auditsearch_fts MATCH %s"


def fts_phrase(folded: str) -> str:
    """`folded` as one FTS5 phrase: every character literal, a `"` doubled."""
    return '"' + folded.replace('"', '""') + '"'


def fts_serves(connection: BaseDatabaseWrapper, folded: str) -> bool:
    """Whether this folded query is answered from the FTS5 trigram table (SQLite only).

    - Asked of the database on each search: a SQLite without FTS5 trigram has no table,
      and the table goes when migrations are taken back past 0023.
    """
    if connection.vendor != "sqlite" or len(folded) < TRIGRAM:
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s", [FTS_TABLE])
        return cursor.fetchone() is not None
