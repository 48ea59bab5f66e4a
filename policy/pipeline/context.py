"""What the layers share about one call: resolved paths, the shell analysis, the host."""

from __future__ import annotations

import functools
import os.path
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from policy.facts import NO_FACTS, AgentFacts
from policy.paths import NormalPath, PathResolver, is_inside, working_directories
from policy.shell import ShellAnalysis, analyse
from policy.tools import ToolSpec
from policy.urls import WebUrl, parse_web_url


@dataclass
class CallContext:
    """Derived facts about the (validated) call, computed once per decision."""

    spec: ToolSpec
    tool_input: dict[str, Any]
    cwd: str
    home: str | None
    mode: str
    roots: tuple[str, ...]
    now: datetime
    additional_directories: tuple[str, ...] = ()
    paths: list[NormalPath] = field(default_factory=list)
    analysis: ShellAnalysis | None = None
    host: str | None = None
    web_url: WebUrl | None = None
    facts: AgentFacts = NO_FACTS
    pinned_roots: tuple[str, ...] = ()
    # One resolver per decision: a path named twice (a redirect target that is also an
    # operand) is resolved once, and nothing resolved outlives the decision.
    resolver: PathResolver = field(init=False, repr=False)
    rule_keys: tuple[str, ...] = field(init=False)
    _operand_paths: list[NormalPath] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.resolver = PathResolver(self.cwd, self.home, self.facts)
        self.rule_keys = rule_keys(self.spec)

    def shell_operand_paths(self) -> list[NormalPath]:
        """Every operand of the shell command as a path (``cat .env``), resolved once.

        The deny and ask layers both need them; resolving symlinks is the costly part.
        """
        if self._operand_paths is None:
            commands = self.analysis.commands if self.analysis is not None else []
            redirects = self.analysis.redirect_paths if self.analysis is not None else ()
            words = [
                word
                for command in commands
                for word in command.words[1:]
                # Any operand may name a file; options cannot.
                if word and not word.startswith("-")
            ]
            # ``cat < .env`` reads .env and ``> x`` writes x: the rules see them too.
            words += [target for target in redirects if target]
            # After ``cd ~/.ssh``, ``cat id_rsa`` reads ~/.ssh/id_rsa.
            spell = self.analysis.relative_spellings if self.analysis is not None else lambda w: [w]
            self._operand_paths = [self.resolver.normalise(s) for word in words for s in spell(word)]
        return self._operand_paths

    def relative_to_roots(self, path: str) -> Mapping[str, str | None]:
        """``path`` relative to each rule root (abs, home, cwd); None where it is outside."""
        return _relatives(path, self.home, self.project_root)

    def bucket_keys(self, path: str) -> tuple[tuple[str, str], ...]:
        """The path-rule buckets that could hold a rule matching ``path``, in root order."""
        return _bucket_keys(path, self.home, self.project_root)

    @property
    def project_root(self) -> str:
        return self.cwd if os.path.isabs(self.cwd) else "/"


# A path's place under each rule root depends on the path, the home and the project root
# only, and the same few recur call after call: each is worked out once, for every call.
@functools.lru_cache(maxsize=1024)
def _relatives(path: str, home: str | None, project_root: str) -> Mapping[str, str | None]:
    return MappingProxyType(
        {
            "abs": _relative(path, "/"),
            "home": _relative(path, home) if home is not None else None,
            "cwd": _relative(path, project_root),
        }
    )


@functools.lru_cache(maxsize=1024)
def _bucket_keys(path: str, home: str | None, project_root: str) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    for root_kind, relative in _relatives(path, home, project_root).items():
        if relative is not None:
            found += [(root_kind, relative.split("/", 1)[0]), (root_kind, "")]
    return tuple(found)


def rule_keys(spec: ToolSpec) -> tuple[str, ...]:
    """Rule tool names that apply: ``Edit`` rules cover every editing tool, etc."""
    name, kind = spec.name, spec.kind
    if kind == "edit":
        return (name, "Edit") if name != "Edit" else (name,)
    if kind == "read":
        return (name, "Read") if name != "Read" else (name,)
    if kind == "mcp":
        return (name, "mcp__" + name.split("__")[1])
    if kind == "bash" and name != "Bash":
        # Monitor's command is checked as a Bash command: Bash rules apply to it.
        return (name, "Bash")
    return (name,)


def _relative(path: str, root: str) -> str | None:
    if not is_inside(path, root):
        return None
    relative = path[1:] if root == "/" else path[len(root) + 1 :]
    return relative or None


def build_context(
    spec: ToolSpec,
    tool_input: dict[str, Any],
    *,
    cwd: str,
    home: str | None,
    mode: str,
    additional: tuple[str, ...],
    now: datetime,
    facts: AgentFacts = NO_FACTS,
    pinned_roots: tuple[str, ...] = (),
) -> CallContext:
    ctx = CallContext(
        spec,
        tool_input,
        cwd,
        home,
        mode,
        working_directories(cwd, additional, home, facts),
        now,
        additional,
        facts=facts,
        pinned_roots=pinned_roots,
    )
    if spec.kind == "bash":
        ctx.analysis = analyse(tool_input.get("command", ""), cwd, additional, home, ctx.resolver)
    elif spec.kind in ("read", "edit"):
        ctx.paths = [ctx.resolver.normalise(p) for p in _input_paths(spec, tool_input, cwd)]
    elif spec.kind == "web":
        ctx.web_url = parse_web_url(str(tool_input.get("url", "")))
        ctx.host = ctx.web_url.host if ctx.web_url is not None else ""
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
