"""What the layers share about one call: resolved paths, the shell analysis, the host."""

from __future__ import annotations

import os.path
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from policy.paths import NormalPath, normalise, working_directories
from policy.shell import ShellAnalysis, analyse
from policy.tools import ToolSpec


@dataclass
class CallContext:
    """Derived facts about the (validated) call, computed once per decision."""

    spec: ToolSpec
    tool_input: dict[str, Any]
    cwd: str
    home: str
    mode: str
    roots: tuple[str, ...]
    now: datetime
    additional_directories: tuple[str, ...] = ()
    paths: list[NormalPath] = field(default_factory=list)
    analysis: ShellAnalysis | None = None
    host: str | None = None
    _operand_paths: list[NormalPath] | None = field(default=None, repr=False)

    def shell_operand_paths(self) -> list[NormalPath]:
        """Every operand of the shell command as a path (``cat .env``), resolved once.

        The deny and ask layers both need them; resolving symlinks is the costly part.
        """
        if self._operand_paths is None:
            commands = self.analysis.commands if self.analysis is not None else []
            self._operand_paths = [
                normalise(word, self.cwd, self.home)
                for command in commands
                for word in command.words[1:]
                # Any operand may name a file; options cannot.
                if word and not word.startswith("-")
            ]
        return self._operand_paths

    @property
    def project_root(self) -> str:
        return self.cwd if os.path.isabs(self.cwd) else "/"

    @property
    def rule_keys(self) -> tuple[str, ...]:
        """Rule tool names that apply: ``Edit`` rules cover every editing tool, etc."""
        name, kind = self.spec.name, self.spec.kind
        if kind == "edit":
            return (name, "Edit") if name != "Edit" else (name,)
        if kind == "read":
            return (name, "Read") if name != "Read" else (name,)
        if kind == "mcp":
            return (name, "mcp__" + name.split("__")[1])
        return (name,)


def build_context(
    spec: ToolSpec, tool_input: dict[str, Any], *, cwd: str, home: str, mode: str,
    additional: tuple[str, ...], now: datetime,
) -> CallContext:
    ctx = CallContext(
        spec, tool_input, cwd, home, mode,
        working_directories(cwd, additional, home), now, additional,
    )
    if spec.kind == "bash":
        ctx.analysis = analyse(tool_input.get("command", ""), cwd, additional, home)
    elif spec.kind in ("read", "edit"):
        ctx.paths = [normalise(p, cwd, home) for p in _input_paths(spec, tool_input, cwd)]
    elif spec.kind == "web":
        ctx.host = (urlsplit(tool_input.get("url", "")).hostname or "").lower()
    return ctx


def _input_paths(spec: ToolSpec, tool_input: dict[str, Any], cwd: str) -> list[str]:
    field_name = spec.path_field or "file_path"
    value = tool_input.get(field_name)
    paths = [value] if isinstance(value, str) and value else [cwd or "/"]
    pattern = tool_input.get("pattern") if spec.name == "Glob" else None
    if isinstance(pattern, str) and (pattern.startswith(("/", "~")) or ".." in pattern):
        # ``Glob(pattern="/etc/**")`` reads where its pattern points, not just ``path``.
        static = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
        base = os.path.dirname(static) or "/"
        paths.append(os.path.join(paths[0], base))
    return paths
