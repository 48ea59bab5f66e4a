"""Parse Claude Code permission rule strings such as ``Bash(git commit:*)``."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Tool names are identifiers; MCP names may carry hyphens (``mcp__my-server__tool``).
_TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
# Every rule is matched on every call of its tool, so its size bounds per-call work:
# long enough for an exact-command grant of a long command line, no longer.
MAX_RULE_CHARS = 8192
MAX_WILDCARDS = 32


class RuleSyntaxError(ValueError):
    """A rule string that Claude Code's syntax does not allow."""


@dataclass(frozen=True)
class Rule:
    """One parsed rule: a tool name and an optional specifier (``content``)."""

    tool_name: str
    content: str | None = None

    def __str__(self) -> str:
        if self.content is None:
            return self.tool_name
        escaped = _escape_content(self.content)
        return f"{self.tool_name}({escaped})"

    @property
    def is_mcp(self) -> bool:
        return self.tool_name.startswith("mcp__")


def _escape_content(content: str) -> str:
    """Escape parentheses only where they would unbalance the rule on re-parse."""
    if _parens_balanced(content):
        return content
    return content.replace("(", r"\(").replace(")", r"\)")


def _parens_balanced(text: str) -> bool:
    depth = 0
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def parse_rule(text: object) -> Rule:
    """Parse ``Tool`` or ``Tool(specifier)``; raise RuleSyntaxError saying what is wrong."""
    if not isinstance(text, str):
        raise RuleSyntaxError(f"rule must be a string, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise RuleSyntaxError("empty rule")
    if len(stripped) > MAX_RULE_CHARS:
        raise RuleSyntaxError(f"{stripped[:60]}…: a rule may be at most {MAX_RULE_CHARS} characters")
    open_at = _first_unescaped(stripped, "(")
    if open_at == -1:
        if _first_unescaped(stripped, ")") != -1:
            raise RuleSyntaxError(f"{stripped}: unbalanced parenthesis")
        return Rule(_checked_tool_name(stripped, stripped))
    tool_name = _checked_tool_name(stripped[:open_at].strip(), stripped)
    if not stripped.endswith(")") or stripped.endswith("\\)"):
        raise RuleSyntaxError(f"{stripped}: unbalanced parenthesis")
    inner = stripped[open_at + 1 : -1]
    if not _parens_balanced(inner):
        raise RuleSyntaxError(f"{stripped}: unbalanced parenthesis")
    content = _unescape(inner)
    # Claude Code treats ``Tool()`` and ``Tool(*)`` as the bare tool name.
    if content.strip() in ("", "*"):
        return Rule(tool_name)
    return Rule(tool_name, content)


def _first_unescaped(text: str, char: str) -> int:
    escaped = False
    for index, current in enumerate(text):
        if escaped:
            escaped = False
        elif current == "\\":
            escaped = True
        elif current == char:
            return index
    return -1


def _unescape(text: str) -> str:
    return text.replace(r"\(", "(").replace(r"\)", ")")


def _checked_tool_name(name: str, whole: str) -> str:
    if not name:
        raise RuleSyntaxError(f"{whole}: missing tool name before '('")
    if not _TOOL_NAME.match(name):
        raise RuleSyntaxError(f"{whole}: invalid tool name {name!r}")
    return name
