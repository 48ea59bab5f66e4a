"""The one interface every agent-side tool implements, and what it gets to work with."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

ProgressCallback = Callable[[dict[str, Any]], Awaitable[None]]


class ToolError(Exception):
    """A failure the model should read: the message is shown, never a traceback.

    - ``telemetry_message`` (optional) is safe to record (SPEC §8): no paths, no input.
    """

    def __init__(self, message: str, telemetry_message: str | None = None) -> None:
        super().__init__(message)
        if telemetry_message:
            self.telemetry_message = telemetry_message


@dataclass(frozen=True)
class InputCheck:
    """The tool's own (semantic) verdict on an input that passed its schema.

    ``ok`` passes; ``behavior="ask"`` hands the call to a human with ``message``;
    otherwise the call is rejected with ``message`` and ``error_code``.
    """

    ok: bool
    message: str = ""
    error_code: int = 0
    behavior: Literal["reject", "ask"] = "reject"

    @classmethod
    def passed(cls) -> InputCheck:
        return cls(True)

    @classmethod
    def reject(cls, message: str, error_code: int = 1) -> InputCheck:
        return cls(False, message, error_code)

    @classmethod
    def ask(cls, message: str) -> InputCheck:
        return cls(False, message, 0, "ask")


@dataclass
class ToolContext:
    """What a tool may touch: its working directories, and where big outputs go."""

    cwd: Path
    additional_directories: tuple[Path, ...] = ()
    session_id: str = ""
    env: dict[str, str] = field(default_factory=dict)
    # Background shells keyed by id, shared by Bash and the tools that read them.
    background: dict[str, Any] = field(default_factory=dict)
    # Files the model has read (path → mtime then), so edits of unseen files are refused.
    read_files: dict[str, float] = field(default_factory=dict)
    # Directories tools may read but never write (where big results were saved).
    read_only_roots: tuple[Path, ...] = ()

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.cwd, *self.additional_directories)

    def resolve(self, raw: str, *, for_write: bool = False) -> Path:
        """Return ``raw`` as an absolute path inside a working directory, or raise ToolError.

        - Symlinks are resolved first, so a link pointing outside is outside.
        - ``read_only_roots`` count only when ``for_write`` is false.
        """
        expanded = os.path.expanduser(raw)
        path = Path(expanded) if os.path.isabs(expanded) else self.cwd / expanded
        real = Path(os.path.realpath(path))
        for root in self.roots if for_write else (*self.roots, *self.read_only_roots):
            real_root = Path(os.path.realpath(root))
            if real == real_root or real_root in real.parents:
                return real
        raise ToolError(
            f"{raw} is outside the working directories ({', '.join(str(r) for r in self.roots)}).",
            "Error:OutsideWorkingDirectory",
        )


@dataclass
class ToolOutput:
    """What a tool call produced: text for the model, plus structured data for hooks."""

    content: str
    data: dict[str, Any] = field(default_factory=dict)


class Tool:
    """One tool: a name, an input schema, a semantic check and an async call.

    Subclasses set ``name`` and ``input_model`` and implement ``call``; the runner does
    lookup, validation, permission, timeouts, result sizing and hooks around them.
    """

    name: ClassVar[str]
    input_model: ClassVar[type[BaseModel]]
    aliases: ClassVar[tuple[str, ...]] = ()
    deprecated_aliases: ClassVar[tuple[str, ...]] = ()
    read_only: ClassVar[bool] = False
    # Seconds before the runner gives up on one call (a tool may enforce a tighter one).
    timeout_seconds: ClassVar[float] = 120.0
    # Outputs longer than this are saved to disk; the model gets the path and a preview.
    max_result_size_chars: ClassVar[int] = 30_000

    async def validate_input(self, tool_input: dict[str, Any], context: ToolContext) -> InputCheck:
        """Check what the schema cannot (a file exists, a path is inside the sandbox)."""
        return InputCheck.passed()

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        raise NotImplementedError
