"""The built-in deterministic classifier: read-only commands and safe tools → allow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.facts import NO_FACTS, AgentFacts
from policy.paths import PathResolver, inside_any, looks_like_path, working_directories
from policy.shell import analyse

NAME = "readonly"
SAFE_TOOLS = frozenset({"Read", "Glob", "Grep", "LS", "TodoWrite", "WebSearch", "BashOutput", "ExitPlanMode"})
READONLY_COMMANDS = frozenset(
    {
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
        "rg",
        "pwd",
        "echo",
        "which",
        "file",
        "stat",
        "du",
        "df",
        "tree",
        "less",
        "more",
        "diff",
        "whoami",
        "date",
        "uname",
        "true",
        "false",
        "basename",
        "dirname",
        "realpath",
        "sort",
        "uniq",
        "cut",
        "tr",
    }
)
READONLY_GIT = frozenset(
    {"status", "log", "diff", "show", "branch", "blame", "rev-parse", "ls-files", "describe", "shortlog", "remote"}
)
# Arguments that make an otherwise read-only command write or execute.
_WRITING_FLAGS = frozenset({"-o", "--output", "--exec", "-exec", "-delete", "-i", "--in-place"})


def classify_readonly(
    tool_name: str,
    tool_input: Mapping[str, Any],
    *,
    cwd: str = "/",
    additional_directories: tuple[str, ...] = (),
    home: str | None = "/nonexistent-home",
    facts: AgentFacts = NO_FACTS,
) -> dict[str, Any]:
    """Return ``{"name", "behavior", "reason"}``; behavior is "allow" or None (no opinion)."""
    if tool_name in SAFE_TOOLS:
        return _verdict("allow", f"{tool_name} is a read-only tool")
    if tool_name != "Bash":
        return _verdict(None, f"{tool_name} is not known to be read-only")
    command = tool_input.get("command")
    if not isinstance(command, str):
        return _verdict(None, "no command")
    resolver = PathResolver(cwd, home, facts)
    analysis = analyse(command, cwd, additional_directories, home, resolver)
    if not analysis.can_auto_allow:
        return _verdict(None, "the command cannot be analysed as read-only")
    if analysis.write_targets:
        # A redirect, ``tee``, ``cp``… writes: never read-only, whatever the command.
        return _verdict(None, f"it writes to {analysis.write_targets[0][0]}")
    roots = working_directories(cwd, additional_directories, home, facts)
    for simple in analysis.commands:
        problem = _readonly_problem(simple.words, simple.wrappers, resolver, roots)
        if problem:
            return _verdict(None, problem)
    return _verdict("allow", "every part of the command is read-only inside the working directories")


def _readonly_problem(
    words: tuple[str, ...],
    wrappers: tuple[str, ...],
    resolver: PathResolver,
    roots: tuple[str, ...],
) -> str | None:
    if wrappers:
        return f"{words[0]} runs under {wrappers[0]}"
    name = words[0]
    if name == "git":
        if len(words) < 2 or words[1] not in READONLY_GIT:
            return "git subcommand may write"
        if words[1] in ("branch", "remote") and len(words) > 2:
            return "git branch/remote with arguments may write"
    elif name not in READONLY_COMMANDS:
        return f"{name} is not a known read-only command"
    for word in words[1:]:
        if word in _WRITING_FLAGS or word.startswith("--output="):
            return f"{word} may write"
        if not looks_like_path(word):
            continue
        path = resolver.normalise(word)
        if not path.known:
            return f"the agent did not report where {word} leads"
        if not inside_any(path, roots):
            return f"{word} is outside the working directories"
    return None


def _verdict(behavior: str | None, reason: str) -> dict[str, Any]:
    return {"name": NAME, "behavior": behavior, "reason": reason}
