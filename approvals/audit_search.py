"""What the audit log's search reads: one lowercase text per row, the same on every database.

`GET /api/v1/audit?q=TEXT` and the audit page's search box find rows whose command,
target (path, URL, pattern…), rule or message contains TEXT, ignoring case. SQLite's
`LIKE` and `lower()` fold ASCII letters only, PostgreSQL's fold all of Unicode: so the
text is case-folded here, in Python, once when the row is written (`AuditSearch`), the
query is folded the same way, and both databases run a plain substring `LIKE` on already
folded text. That gives the same hits on both. PostgreSQL serves the `LIKE` from a
trigram index (`pg_trgm`, migration 0006); SQLite scans the search table.
"""

from __future__ import annotations

from typing import Any

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
