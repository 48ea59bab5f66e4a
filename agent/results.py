"""Stage 6 and 8: turn a tool's output into the `tool_result` block the model reads."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREVIEW_CHARS = 2_000


@dataclass
class ToolResult:
    """One `tool_result` content block, plus what the runner learned on the way.

    ``block()`` is exactly what goes back to the model in the next user message.
    """

    tool_use_id: str
    content: str
    is_error: bool = False
    tool_name: str = ""
    # Which stage produced it: lookup, validation, hooks, permission, execution, result.
    stage: str = "result"
    error_class: str | None = None
    permission: dict[str, Any] | None = None
    request_id: str | None = None
    persisted_path: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def block(self) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": self.tool_use_id, "content": self.content}
        if self.is_error:
            block["is_error"] = True
        return block


def tool_use_error(message: str) -> str:
    """Wrap a message the way Claude Code does, so the model knows to correct its call."""
    if message.startswith("<tool_use_error>"):
        return message
    return f"<tool_use_error>{message}</tool_use_error>"


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def persist_if_large(content: str, *, limit: int, directory: Path, tool_use_id: str) -> tuple[str, str | None]:
    """Save content over ``limit`` characters to disk; return what the model sees and the path.

    The model gets the path and a preview, so one huge grep cannot fill its context, yet
    nothing is lost: it can Read the file in slices.
    """
    if len(content) <= limit:
        return content, None
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{_UNSAFE.sub('_', tool_use_id) or 'result'}.txt"
    path.write_text(content, encoding="utf-8")
    preview = content[: min(PREVIEW_CHARS, limit)]
    shown = (
        f"<persisted-output>\nOutput too large ({len(content)} characters). "
        f"Full output saved to: {path}\n\nPreview (first {len(preview)} characters):\n{preview}\n...\n"
        "</persisted-output>"
    )
    return shown, str(path)
