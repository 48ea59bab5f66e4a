"""Glob and Grep: read-only searches inside the working directories."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from agent.tools.base import InputCheck, ProgressCallback, Tool, ToolContext, ToolError, ToolOutput
from policy.tools.schemas import GlobInput, GrepInput

# Directories no search should wander into: huge, and never what the model wants.
SKIPPED_DIRS = frozenset({".git", "node_modules", ".venv", "__pycache__", ".mypy_cache"})


def _files_under(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(names):
            yield Path(folder) / name


def _search_root(tool_input: dict[str, Any], context: ToolContext) -> Path:
    return context.resolve(tool_input.get("path") or str(context.cwd))


class GlobTool(Tool):
    """List files matching a glob pattern, newest first."""

    name = "Glob"
    input_model = GlobInput
    read_only = True
    limit = 100

    async def validate_input(self, tool_input: dict[str, Any], context: ToolContext) -> InputCheck:
        try:
            root = _search_root(tool_input, context)
        except ToolError as exc:
            return InputCheck.reject(str(exc), 2)
        if not root.is_dir():
            return InputCheck.reject(f"Directory does not exist: {tool_input.get('path')}", 3)
        return InputCheck.passed()

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        root = _search_root(tool_input, context)
        matches = [p for p in root.glob(tool_input["pattern"]) if p.is_file() and not SKIPPED_DIRS & set(p.parts)]
        matches.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        shown = matches[: self.limit]
        if not shown:
            return ToolOutput("No files found", {"count": 0})
        lines = [str(p) for p in shown]
        if len(matches) > self.limit:
            lines.append("(Results are truncated. Consider using a more specific path or pattern.)")
        return ToolOutput("\n".join(lines), {"count": len(matches)})


class GrepToolInput(GrepInput):
    output_mode: Literal["content", "files_with_matches", "count"] = "files_with_matches"
    case_insensitive: bool = Field(default=False, alias="-i")
    head_limit: int | None = Field(default=None, ge=1)


class GrepTool(Tool):
    """Search file contents with a Python regular expression."""

    name = "Grep"
    input_model = GrepToolInput
    read_only = True

    async def validate_input(self, tool_input: dict[str, Any], context: ToolContext) -> InputCheck:
        try:
            re.compile(tool_input["pattern"])
            root = _search_root(tool_input, context)
        except re.error as exc:
            return InputCheck.reject(f"Invalid regular expression: {exc}", 5)
        except ToolError as exc:
            return InputCheck.reject(str(exc), 2)
        if not root.exists():
            return InputCheck.reject(f"Path does not exist: {tool_input.get('path')}", 3)
        return InputCheck.passed()

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        flags = re.IGNORECASE if tool_input.get("-i") or tool_input.get("case_insensitive") else 0
        pattern = re.compile(tool_input["pattern"], flags)
        mode = tool_input.get("output_mode") or "files_with_matches"
        name_glob = tool_input.get("glob")
        lines: list[str] = []
        files = 0
        for path in _files_under(_search_root(tool_input, context)):
            if name_glob and not fnmatch.fnmatch(path.name, name_glob):
                continue
            hits = _matching_lines(path, pattern)
            if not hits:
                continue
            files += 1
            if mode == "files_with_matches":
                lines.append(str(path))
            elif mode == "count":
                lines.append(f"{path}:{len(hits)}")
            else:
                lines.extend(f"{path}:{number}:{text}" for number, text in hits)
        limit = tool_input.get("head_limit")
        if limit:
            lines = lines[:limit]
        if not lines:
            return ToolOutput("No matches found", {"files": 0})
        return ToolOutput("\n".join(lines), {"files": files})


def _matching_lines(path: Path, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8") as handle:
            return [(n, line.rstrip("\n")) for n, line in enumerate(handle, start=1) if pattern.search(line)]
    except (UnicodeDecodeError, OSError):
        # Binary or unreadable files are skipped, as ripgrep does by default.
        return []
