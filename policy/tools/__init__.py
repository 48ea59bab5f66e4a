"""The tool registry: Claude Code 2.1.332's tools, their aliases, input schemas, who asks.

Which tools exist, their input schemas and whether Claude Code asks before running each
come from the recording of the real CLI (``policy.tools.recording``). What Gatehouse adds
by hand: how a tool's rules match and which of its inputs is a path (``_OWN_CHECKS``),
Gatehouse's own schemas for the tools it checks itself (they coerce ``"5"`` to ``5``), and
the tools older CLIs had that 2.1.332 no longer offers (``_LEGACY``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel

from policy.tools import recording, schemas

# How a tool's rules are matched and how its own check behaves.
ToolKind = Literal["bash", "read", "edit", "web", "search", "mcp", "task", "other"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool the gateway knows: its schema, kind, the input field holding its path, who asks."""

    name: str
    # Gatehouse's own schema; None: the recorded ``json_schema`` (or, unknown, any object).
    schema: type[BaseModel] | None
    kind: ToolKind
    path_field: str | None = None
    read_only: bool = False
    aliases: tuple[str, ...] = ()
    deprecated_aliases: tuple[str, ...] = ()
    notes: str = ""
    json_schema: Mapping[str, Any] | None = None
    # False: Claude Code runs it without asking; deny and ask rules still apply.
    needs_permission: bool = True
    # Claude Code's own check refuses every call with this message.
    refusal: str = ""
    # False: Claude Code asks even under an allow rule naming the tool.
    allow_rules_answer: bool = True
    # Not offered by the recorded Claude Code; kept for older CLIs and Gatehouse's agent.
    legacy: bool = False
    # False for a name no entry knows: a newer CLI's tool, decided by a person.
    known: bool = True


@dataclass(frozen=True)
class Lookup:
    """Result of a registry lookup: the spec (or None) and any deprecation warning."""

    spec: ToolSpec | None
    requested: str
    warnings: list[str] = field(default_factory=list)


# Tools whose calls Gatehouse checks itself (paths, commands, URLs) or whose rules take a
# specifier; their permission facts still come from the recording.
_OWN_CHECKS: tuple[ToolSpec, ...] = (
    ToolSpec("Bash", schemas.BashInput, "bash"),
    ToolSpec("Read", schemas.ReadInput, "read", "file_path", read_only=True),
    ToolSpec("Write", schemas.WriteInput, "edit", "file_path"),
    ToolSpec("Edit", schemas.EditInput, "edit", "file_path"),
    ToolSpec("NotebookEdit", schemas.NotebookEditInput, "edit", "notebook_path"),
    ToolSpec("Glob", schemas.GlobInput, "read", "path", read_only=True),
    ToolSpec("Grep", schemas.GrepInput, "read", "path", read_only=True),
    ToolSpec("WebFetch", schemas.WebFetchInput, "web"),
    ToolSpec("WebSearch", schemas.WebSearchInput, "search", read_only=True),
    # 2.1.332 calls it Agent and still accepts Task (the recording's old names).
    ToolSpec("Task", schemas.TaskInput, "task", aliases=("Agent",)),
    ToolSpec("TodoWrite", schemas.TodoWriteInput, "other"),
    ToolSpec("ExitPlanMode", schemas.ExitPlanModeInput, "other"),
    ToolSpec("Skill", schemas.SkillInput, "other"),
    # Its answer is a person's: an ask the card shows as its questions (approvals.questions).
    ToolSpec("AskUserQuestion", schemas.AskUserQuestionInput, "other"),
    # 2.1.332 still accepts KillShell and KillBash for TaskStop; KillBash is the oldest name.
    ToolSpec("TaskStop", None, "other", aliases=("KillShell",), deprecated_aliases=("KillBash",)),
    # Monitor runs a shell command, which Claude Code checks as a Bash command: Bash rules
    # allow, deny and ask it (a bare Bash allow does not; a bare Bash deny does).
    ToolSpec("Monitor", None, "bash", notes="its command is checked as a Bash command"),
)

_LEGACY: tuple[ToolSpec, ...] = (
    ToolSpec("MultiEdit", schemas.MultiEditInput, "edit", "file_path", legacy=True),
    ToolSpec("LS", schemas.LsInput, "read", "path", read_only=True, legacy=True),
    ToolSpec("BashOutput", schemas.BashOutputInput, "other", needs_permission=False, legacy=True),
    ToolSpec("SlashCommand", schemas.SlashCommandInput, "other", legacy=True),
)


def _registry(recorded: Mapping[str, recording.RecordedTool]) -> tuple[ToolSpec, ...]:
    """Every recorded tool, with Gatehouse's own check where it has one, then the legacy ones."""
    own = {name: spec for spec in _OWN_CHECKS for name in (spec.name, *spec.aliases)}
    specs = []
    for name, tool in recorded.items():
        base = own.get(name) or ToolSpec(name, None, "other")
        specs.append(
            replace(
                base,
                json_schema=tool.input_schema,
                needs_permission=tool.needs_permission,
                refusal=tool.refused,
                allow_rules_answer=tool.allow_rule_answers,
            )
        )
    return (*sorted(specs, key=lambda s: s.name), *_LEGACY)


CLAUDE_CODE_TOOLS = recording.load()
_BUILTINS = _registry(CLAUDE_CODE_TOOLS)
BUILTIN_TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in _BUILTINS}
_ALIASES: dict[str, ToolSpec] = {alias: spec for spec in _BUILTINS for alias in spec.aliases}
_DEPRECATED: dict[str, ToolSpec] = {alias: spec for spec in _BUILTINS for alias in spec.deprecated_aliases}

# Tools whose rule specifier is a path (Claude Code: Edit rules cover every editing
# tool; Read rules are applied to every tool that reads files).
EDIT_TOOLS = frozenset(s.name for s in _BUILTINS if s.kind == "edit")
READ_TOOLS = frozenset(s.name for s in _BUILTINS if s.kind == "read")


def unknown_spec(name: str) -> ToolSpec:
    """The spec of a tool no entry knows: any object input, rules by its name, a person decides."""
    return ToolSpec(name, None, "other", known=False)


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
    "CLAUDE_CODE_TOOLS",
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
    "unknown_spec",
]
