"""The tool registry: Claude Code's built-in tools, their aliases and input schemas."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from policy.tools import schemas

# How a tool's rules are matched and how its own check behaves.
ToolKind = Literal["bash", "read", "edit", "web", "search", "mcp", "task", "other"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool the gateway knows: its schema, kind and the input field holding its path."""

    name: str
    schema: type[BaseModel]
    kind: ToolKind
    path_field: str | None = None
    read_only: bool = False
    aliases: tuple[str, ...] = ()
    deprecated_aliases: tuple[str, ...] = ()
    notes: str = ""


@dataclass(frozen=True)
class Lookup:
    """Result of a registry lookup: the spec (or None) and any deprecation warning."""

    spec: ToolSpec | None
    requested: str
    warnings: list[str] = field(default_factory=list)


_BUILTINS: tuple[ToolSpec, ...] = (
    ToolSpec("Bash", schemas.BashInput, "bash"),
    ToolSpec("Read", schemas.ReadInput, "read", "file_path", read_only=True),
    ToolSpec("Write", schemas.WriteInput, "edit", "file_path"),
    ToolSpec("Edit", schemas.EditInput, "edit", "file_path"),
    ToolSpec("MultiEdit", schemas.MultiEditInput, "edit", "file_path"),
    ToolSpec("NotebookEdit", schemas.NotebookEditInput, "edit", "notebook_path"),
    ToolSpec("Glob", schemas.GlobInput, "read", "path", read_only=True),
    ToolSpec("Grep", schemas.GrepInput, "read", "path", read_only=True),
    ToolSpec("LS", schemas.LsInput, "read", "path", read_only=True),
    ToolSpec("WebFetch", schemas.WebFetchInput, "web"),
    ToolSpec("WebSearch", schemas.WebSearchInput, "search", read_only=True),
    ToolSpec("Task", schemas.TaskInput, "task", aliases=("Agent",)),
    ToolSpec("TodoWrite", schemas.TodoWriteInput, "other", read_only=True),
    # KillBash was renamed KillShell; old transcripts and models still use the old name.
    ToolSpec("KillShell", schemas.KillShellInput, "other", deprecated_aliases=("KillBash",)),
    ToolSpec("BashOutput", schemas.BashOutputInput, "other", read_only=True),
    ToolSpec("ExitPlanMode", schemas.ExitPlanModeInput, "other", read_only=True),
    ToolSpec("Skill", schemas.SkillInput, "other"),
    # Its answer is a person's: an ask the card shows as its questions (approvals.questions).
    ToolSpec("AskUserQuestion", schemas.AskUserQuestionInput, "other"),
    ToolSpec("SlashCommand", schemas.SlashCommandInput, "other"),
)

BUILTIN_TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in _BUILTINS}
_ALIASES: dict[str, ToolSpec] = {alias: spec for spec in _BUILTINS for alias in spec.aliases}
_DEPRECATED: dict[str, ToolSpec] = {alias: spec for spec in _BUILTINS for alias in spec.deprecated_aliases}

# Tools whose rule specifier is a path (Claude Code: Edit rules cover every editing
# tool; Read rules are applied to every tool that reads files).
EDIT_TOOLS = frozenset(s.name for s in _BUILTINS if s.kind == "edit")
READ_TOOLS = frozenset(s.name for s in _BUILTINS if s.kind == "read")


def mcp_spec(name: str) -> ToolSpec:
    """Build the pass-through spec for an ``mcp__server__tool`` name."""
    return ToolSpec(name, schemas.McpInput, "mcp")


def is_mcp_name(name: str) -> bool:
    parts = name.split("__")
    return len(parts) >= 3 and parts[0] == "mcp" and all(parts[1:3])


def lookup(name: object) -> Lookup:
    """Find a tool by name or alias; a deprecated alias works and carries a warning."""
    if not isinstance(name, str) or not name:
        return Lookup(None, str(name))
    if name in BUILTIN_TOOLS:
        return Lookup(BUILTIN_TOOLS[name], name)
    if name in _ALIASES:
        return Lookup(_ALIASES[name], name)
    if name in _DEPRECATED:
        spec = _DEPRECATED[name]
        warning = f"Tool name {name!r} is deprecated; use {spec.name!r} instead."
        return Lookup(spec, name, [warning])
    if is_mcp_name(name):
        return Lookup(mcp_spec(name), name)
    return Lookup(None, name)


def known_tool_names() -> list[str]:
    return sorted(BUILTIN_TOOLS)


def canonical_rule_tool(name: str) -> str:
    """Map a rule's tool name through aliases so ``Agent(x)`` and ``Task(x)`` agree."""
    if name in _ALIASES:
        return _ALIASES[name].name
    if name in _DEPRECATED:
        return _DEPRECATED[name].name
    return name


__all__ = [
    "BUILTIN_TOOLS",
    "EDIT_TOOLS",
    "READ_TOOLS",
    "Lookup",
    "ToolKind",
    "ToolSpec",
    "canonical_rule_tool",
    "is_mcp_name",
    "known_tool_names",
    "lookup",
    "mcp_spec",
]
