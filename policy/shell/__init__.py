"""Shell-command analysis with tree-sitter-bash (SPEC §5): analysed, never string-matched."""

from __future__ import annotations

import functools
import os.path
from collections.abc import Iterable
from dataclasses import dataclass

from policy.paths import (
    HARMLESS_DEVICES,
    inside_any,
    looks_like_path,
    normalise,
    sensitive_reason,
    working_directories,
)
from policy.shell.commands import SimpleCommand, Walk, walk_source
from policy.shell.destructive import destructive_warning
from policy.shell.suggest import suggested_rules

MAX_COMMAND_BYTES = 256 * 1024  # longer commands are not parsed; they never auto-allow


@dataclass(frozen=True)
class ShellAnalysis:
    """Everything the pipeline needs to know about one command line."""

    command: str
    commands: tuple[SimpleCommand, ...]
    blockers: tuple[str, ...]
    parse_error: bool
    substitution: bool
    eval_like: bool
    redirects_outside: tuple[str, ...]
    destructive_warning: str | None
    suggested_rules: tuple[str, ...]

    @property
    def can_auto_allow(self) -> bool:
        """False when any part of the command must be seen by a human or classifier."""
        return not self.blockers and bool(self.commands)

    @property
    def suggested_rule(self) -> str | None:
        return self.suggested_rules[0] if self.suggested_rules else None

    def to_dict(self) -> dict[str, object]:
        return {
            "commands": [list(c.words) for c in self.commands],
            "blockers": list(self.blockers),
            "parse_error": self.parse_error,
            "substitution": self.substitution,
            "eval": self.eval_like,
            "redirects_outside": list(self.redirects_outside),
            "destructive_warning": self.destructive_warning,
            "suggested_rule": self.suggested_rule,
        }


def analyse(
    command: str,
    cwd: str = "/",
    additional_directories: Iterable[str] = (),
    home: str | None = None,
) -> ShellAnalysis:
    """Split ``command`` into simple commands and flag what must never auto-allow."""
    home = home if home is not None else os.path.expanduser("~")
    return _analyse_cached(command, cwd, tuple(additional_directories), home)


@functools.lru_cache(maxsize=2048)
def _analyse_cached(
    command: str, cwd: str, additional: tuple[str, ...], home: str
) -> ShellAnalysis:
    # Agents repeat the same commands constantly, so the parse is memoised.
    walk = Walk(cwd)
    if len(command.encode("utf-8", "surrogatepass")) > MAX_COMMAND_BYTES:
        walk.parse_error = True
        walk.block("the command is too long to analyse")
    elif "\x00" in command:
        walk.parse_error = True
        walk.block("the command contains NUL bytes")
    else:
        walk_source(command, walk)
    outside = _redirects_outside(walk, cwd, additional, home)
    for target in outside:
        walk.block(f"it redirects to {target}, outside the working directories")
    _check_sensitive_arguments(walk, cwd, home)
    commands = tuple(walk.commands)
    warning = destructive_warning(command, commands)
    # Never offer "always allow" for something unsafe or destructive.
    blocked = bool(walk.blockers) or warning is not None
    return ShellAnalysis(
        command=command,
        commands=commands,
        blockers=tuple(walk.blockers),
        parse_error=walk.parse_error,
        substitution=walk.substitution,
        eval_like=walk.eval_like,
        redirects_outside=tuple(outside),
        destructive_warning=warning,
        suggested_rules=() if blocked else tuple(suggested_rules(commands)),
    )


def _check_sensitive_arguments(walk: Walk, cwd: str, home: str) -> None:
    for command in walk.commands:
        for word in command.words[1:]:
            if not looks_like_path(word):
                continue
            reason = sensitive_reason(normalise(word, cwd, home), home)
            if reason:
                walk.block(f"it names {word}: {reason}")


def _redirects_outside(
    walk: Walk, cwd: str, additional: tuple[str, ...], home: str
) -> list[str]:
    roots = working_directories(cwd, additional, home)
    outside: list[str] = []
    for target, dynamic in walk.redirect_targets:
        if dynamic:
            outside.append(target)
            continue
        if target in HARMLESS_DEVICES:
            continue
        if not inside_any(normalise(target, cwd, home), roots):
            outside.append(target)
    return outside


__all__ = ["ShellAnalysis", "SimpleCommand", "analyse"]
