"""Shell-command analysis with tree-sitter-bash (SPEC §5): analysed, never string-matched."""

from __future__ import annotations

import functools
import os.path
from collections.abc import Iterable
from dataclasses import dataclass, replace

from policy.paths import (
    HARMLESS_DEVICES,
    PathResolver,
    inside_any,
    looks_like_path,
    sensitive_reason,
    unreported,
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
    # Every redirect target as written (``cat < .env`` reads .env), and the files the
    # line writes (redirects, ``tee``, ``cp`` …) with whether each is only known at run time.
    redirect_paths: tuple[str, ...] = ()
    write_targets: tuple[tuple[str, bool], ...] = ()
    # Where ``cd``/``pushd`` move the line, in order and accumulated (``cd a && cd b`` →
    # ``a``, ``a/b``), with whether each is only known at run time: relative paths after
    # them may be relative to any of these.
    directories: tuple[tuple[str, bool], ...] = ()
    # What ``rm``/``rmdir`` remove, as (command name, operand as written; a glob kept as is).
    removals: tuple[tuple[str, str], ...] = ()
    # Output redirect targets as written (``> out.txt``, ``2>> log``), devices included.
    output_redirects: tuple[str, ...] = ()
    # More than a plain list of commands: a subshell, a ``{ … }`` group, a loop, ``if``.
    grouped: bool = False

    def relative_spellings(self, path: str) -> list[str]:
        """``path`` as given, and as seen from each directory the line moves to."""
        if path.startswith(("/", "~")) or not self.directories:
            return [path]
        return [path, *(os.path.join(directory, path) for directory, _ in self.directories)]

    @property
    def unknown_directory(self) -> bool:
        return any(unknown for _, unknown in self.directories)

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
            "writes": [target for target, _ in self.write_targets],
        }


def analyse(
    command: str,
    cwd: str = "/",
    additional_directories: Iterable[str] = (),
    home: str | None = None,
    resolver: PathResolver | None = None,
) -> ShellAnalysis:
    """Split ``command`` into simple commands and flag what must never auto-allow.

    - ``resolver`` resolves the paths the command names (one per decision, built for
      the same cwd and home); without it each call resolves afresh.
    """
    parsed = parse(command)
    if not parsed.names_paths:
        return parsed.analysis  # the string alone decides
    # Never the server's own home or disk: only what the agent reported.
    resolver = resolver if resolver is not None else PathResolver(cwd, home)
    home = resolver.home
    blockers = list(parsed.analysis.blockers)
    roots = working_directories(cwd, additional_directories, home, resolver.facts)
    outside = _redirects_outside(parsed.redirect_targets, resolver, roots)
    for target in outside:
        _block(blockers, f"it redirects to {target}, outside the working directories")
    targets = [t for t, dynamic in parsed.redirect_targets if not dynamic and t not in HARMLESS_DEVICES]
    for word in targets + list(parsed.path_words):
        path = resolver.normalise(word)
        reason = (sensitive_reason(path, home) if home is not None else None) or unreported(path, home)
        if reason:
            _block(blockers, f"it names {word}: {reason}")
    return parsed.finish(tuple(blockers), tuple(outside))


@dataclass(frozen=True)
class ParsedCommand:
    """What the command string alone determines; cached, so immutable and shared.

    Paths on disk are not part of it: symlinks change between calls, so redirect
    targets and path-like words are resolved again for every decision. ``analysis`` is
    what the string alone says; for a line that names no path it is the whole answer.
    """

    analysis: ShellAnalysis
    redirect_targets: tuple[tuple[str, bool], ...]
    path_words: tuple[str, ...]
    suggestions: tuple[str, ...]

    @property
    def names_paths(self) -> bool:
        return bool(self.redirect_targets or self.path_words)

    def finish(self, blockers: tuple[str, ...], outside: tuple[str, ...]) -> ShellAnalysis:
        # Never offer "always allow" for something unsafe or destructive.
        blocked = bool(blockers) or self.analysis.destructive_warning is not None
        return replace(
            self.analysis,
            blockers=blockers,
            redirects_outside=outside,
            suggested_rules=() if blocked else self.suggestions,
        )


# Agents repeat the same commands constantly; long ones are rare, so they are parsed
# each time rather than letting a few hundred of them pin megabytes in the cache.
CACHED_COMMAND_CHARS = 8 * 1024


def parse(command: str) -> ParsedCommand:
    """Parse ``command`` (memoised for commands up to ``CACHED_COMMAND_CHARS``)."""
    if len(command) > CACHED_COMMAND_CHARS:
        return _parse(command)
    return _parse_cached(command)


@functools.lru_cache(maxsize=2048)
def _parse_cached(command: str) -> ParsedCommand:
    return _parse(command)


def _parse(command: str) -> ParsedCommand:
    walk = Walk("")
    if len(command.encode("utf-8", "surrogatepass")) > MAX_COMMAND_BYTES:
        walk.parse_error = True
        walk.block("the command is too long to analyse")
    elif "\x00" in command:
        walk.parse_error = True
        walk.block("the command contains NUL bytes")
    else:
        walk_source(command, walk)
    commands = tuple(walk.commands)
    from_the_string = ShellAnalysis(
        command=command,
        commands=commands,
        blockers=tuple(walk.blockers),
        parse_error=walk.parse_error,
        substitution=walk.substitution,
        eval_like=walk.eval_like,
        redirects_outside=(),
        destructive_warning=destructive_warning(command, commands),
        suggested_rules=(),
        redirect_paths=tuple(target for target, dynamic in walk.redirect_targets if not dynamic),
        write_targets=tuple(dict.fromkeys(walk.write_targets)),
        directories=_directories(commands),
        removals=tuple(dict.fromkeys(walk.removals)),
        output_redirects=tuple(dict.fromkeys(walk.output_redirects)),
        grouped=walk.grouped,
    )
    parsed = ParsedCommand(
        analysis=from_the_string,
        redirect_targets=tuple(walk.redirect_targets),
        path_words=tuple(word for c in commands for word in c.words[1:] if looks_like_path(word)),
        suggestions=tuple(suggested_rules(commands)),
    )
    if parsed.names_paths:
        return parsed
    return replace(parsed, analysis=parsed.finish(from_the_string.blockers, ()))


def _directories(commands: tuple[SimpleCommand, ...]) -> tuple[tuple[str, bool], ...]:
    found: list[tuple[str, bool]] = []
    current, unknown = "", False
    for command in commands:
        if command.name not in ("cd", "pushd"):
            continue
        operands = [w for w in command.words[1:] if not w.startswith("-") or w == "-"]
        target = operands[0] if operands else "~"
        unknown = unknown or target == "-" or target in command.unresolved
        current = target if target.startswith(("/", "~")) or not current else os.path.join(current, target)
        found.append((current, unknown))
    return tuple(found)


def _block(blockers: list[str], reason: str) -> None:
    if reason not in blockers:
        blockers.append(reason)


def _redirects_outside(
    targets: tuple[tuple[str, bool], ...], resolver: PathResolver, roots: tuple[str, ...]
) -> list[str]:
    outside: list[str] = []
    for target, dynamic in targets:
        if dynamic:
            outside.append(target)
            continue
        if target in HARMLESS_DEVICES:
            continue
        if not inside_any(resolver.normalise(target), roots):
            outside.append(target)
    return outside


__all__ = ["ParsedCommand", "ShellAnalysis", "SimpleCommand", "analyse", "parse"]
