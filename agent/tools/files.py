"""Read, Write and Edit: file tools confined to the working directories."""

from __future__ import annotations

import os
from typing import Any

from agent.tools.base import InputCheck, ProgressCallback, Tool, ToolContext, ToolError, ToolOutput
from policy.tools.schemas import EditInput, ReadInput, WriteInput

# Claude Code refuses to edit a file the model has not seen, or has changed since it saw it.
NOT_READ = "File has not been read yet. Read it first before writing to it."
CHANGED = "File has been modified since it was read. Read it again before writing to it."


def _checked_path(raw: str, context: ToolContext, *, for_write: bool = True) -> tuple[Any, InputCheck | None]:
    try:
        return context.resolve(raw, for_write=for_write), None
    except ToolError as exc:
        return None, InputCheck.reject(str(exc), 2)


def _stale(path: Any, context: ToolContext) -> InputCheck | None:
    seen = context.read_files.get(str(path))
    if seen is None:
        return InputCheck.reject(NOT_READ, 6)
    if os.path.getmtime(path) > seen:
        return InputCheck.reject(CHANGED, 7)
    return None


class ReadTool(Tool):
    """Read a text file, numbered like ``cat -n``."""

    name = "Read"
    input_model = ReadInput
    read_only = True
    default_limit = 2000
    max_line_chars = 2000

    async def validate_input(self, tool_input: dict[str, Any], context: ToolContext) -> InputCheck:
        path, problem = _checked_path(tool_input["file_path"], context, for_write=False)
        if problem:
            return problem
        if not path.exists():
            return InputCheck.reject(f"File does not exist: {tool_input['file_path']}", 3)
        if path.is_dir():
            return InputCheck.reject(f"{tool_input['file_path']} is a directory; use Glob or Bash ls.", 4)
        return InputCheck.passed()

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        path = context.resolve(tool_input["file_path"])
        offset = max(int(tool_input.get("offset") or 1), 1)
        limit = int(tool_input.get("limit") or self.default_limit)
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
        context.read_files[str(path)] = os.path.getmtime(path)
        chosen = lines[offset - 1 : offset - 1 + limit]
        if not lines:
            return ToolOutput("<system-reminder>The file exists but is empty.</system-reminder>", {"lines": 0})
        numbered = [f"{n:>6}\t{line[: self.max_line_chars]}" for n, line in enumerate(chosen, start=offset)]
        return ToolOutput("\n".join(numbered), {"lines": len(chosen), "total_lines": len(lines)})


class WriteTool(Tool):
    """Create or overwrite a file (an existing one must have been read first)."""

    name = "Write"
    input_model = WriteInput

    async def validate_input(self, tool_input: dict[str, Any], context: ToolContext) -> InputCheck:
        path, problem = _checked_path(tool_input["file_path"], context)
        if problem:
            return problem
        if path.is_dir():
            return InputCheck.reject(f"{tool_input['file_path']} is a directory, not a file.", 4)
        if path.exists():
            return _stale(path, context) or InputCheck.passed()
        return InputCheck.passed()

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        path = context.resolve(tool_input["file_path"], for_write=True)
        created = not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(tool_input["content"], encoding="utf-8")
        context.read_files[str(path)] = os.path.getmtime(path)
        verb = "created" if created else "updated"
        return ToolOutput(f"File {verb} successfully at: {path}", {"created": created})


class EditTool(Tool):
    """Replace an exact string in a file; it must occur once unless ``replace_all``."""

    name = "Edit"
    input_model = EditInput

    async def validate_input(self, tool_input: dict[str, Any], context: ToolContext) -> InputCheck:
        old, new = tool_input["old_string"], tool_input["new_string"]
        if old == new:
            return InputCheck.reject("No changes to make: old_string and new_string are exactly the same.", 1)
        path, problem = _checked_path(tool_input["file_path"], context)
        if problem:
            return problem
        if not path.exists():
            if old == "":
                return InputCheck.passed()
            return InputCheck.reject(f"File does not exist: {tool_input['file_path']}", 3)
        stale = _stale(path, context)
        if stale:
            return stale
        text = path.read_text(encoding="utf-8", errors="replace")
        count = text.count(old) if old else 0
        if old and count == 0:
            return InputCheck.reject(f"String to replace not found in file.\nString: {old}", 8)
        if count > 1 and not tool_input.get("replace_all"):
            return InputCheck.reject(
                f"Found {count} matches of the string to replace, but replace_all is false. "
                "To replace all occurrences, set replace_all to true. To replace only one, "
                "add more surrounding context to make it unique.",
                9,
            )
        return InputCheck.passed()

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        path = context.resolve(tool_input["file_path"], for_write=True)
        old, new = tool_input["old_string"], tool_input["new_string"]
        if not old:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(new, encoding="utf-8")
            replaced = 1
        else:
            text = path.read_text(encoding="utf-8")
            replaced = text.count(old) if tool_input.get("replace_all") else 1
            path.write_text(text.replace(old, new, -1 if tool_input.get("replace_all") else 1), encoding="utf-8")
        context.read_files[str(path)] = os.path.getmtime(path)
        return ToolOutput(f"The file {path} has been updated ({replaced} replacement(s)).", {"replacements": replaced})
