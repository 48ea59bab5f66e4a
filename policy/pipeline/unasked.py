"""What Claude Code 2.1.332 runs without asking: read-only lines, and acceptEdits' file commands.

A line of nothing but read-only commands reading inside the working directories is the
Bash tool's own allow (layer 1c) in every mode; in acceptEdits, so is a line of read-only
and file commands (``mkdir``, ``touch``, ``rm``, ``rmdir``, ``mv``, ``cp``, ``sed -i``)
and output redirects whose every path lies in the working directories. In a line an
allow rule covers, a read-only command needs no rule of its own (``cd /srv/data && ls``
under ``Bash(ls *)`` and ``Read(//srv/data/**)``), as Claude Code checks each part of a
line on its own.
"""

from __future__ import annotations

import os.path
from collections.abc import Callable

from policy.paths import HARMLESS_DEVICES, NormalPath, inside_any
from policy.pipeline.context import CallContext
from policy.shell import ShellAnalysis
from policy.shell.commands import SimpleCommand
from policy.shell.unasked import file_operands, read_operands

# Only known when the line runs: an expansion, a substitution, another user's ``~bob``.
_EXPANSIONS = ("$", "`", "{")
_GLOB = ("*", "?", "[")
Readable = Callable[[NormalPath], bool]


def read_only_line(analysis: ShellAnalysis, ctx: CallContext) -> bool:
    """Every command read-only, every file it reads (input redirects too) in a working directory.

    Simple commands joined by ``&&``, ``||``, ``;``, ``|`` and newlines; no subshell,
    group or loop, no ``cd`` to a place only known at run time, no blocker, nothing
    written but to ``/dev/null`` and the like.
    """
    if not _plain_line(analysis, ctx):
        return False
    if any(target not in HARMLESS_DEVICES for target, _ in analysis.write_targets):
        return False
    return _inputs_inside(analysis, ctx) and all(
        read_only_command(analysis, index, ctx) for index in range(len(analysis.commands))
    )


def accept_edits_line(analysis: ShellAnalysis, ctx: CallContext) -> bool:
    """acceptEdits: read-only and file commands, every path read or written in a working directory."""
    if not _plain_line(analysis, ctx) or not _inputs_inside(analysis, ctx):
        return False
    written = [target for target, _ in analysis.write_targets if target not in HARMLESS_DEVICES]
    if not all(_inside(s, target, ctx) for target in written for s in analysis.relative_spellings(target)):
        return False
    for index, command in enumerate(analysis.commands):
        if read_only_command(analysis, index, ctx):
            continue
        operands = file_operands(command)
        if operands is None or not _words_inside(command, operands, analysis, ctx):
            return False
    return True


def read_only_command(
    analysis: ShellAnalysis, index: int, ctx: CallContext, also_readable: Readable | None = None
) -> bool:
    """Whether ``analysis.commands[index]`` is read-only and reads only what it may.

    - Its files lie in a working directory as written and where the agent reported they
      lead (a glob is taken as written: ``ls *``), or ``also_readable`` says so.
    - Relative operands are also read from each directory ``cd`` moved the line to; a
      ``cd`` target from each directory an earlier ``cd`` moved it to.
    """
    command = analysis.commands[index]
    operands = read_operands(command) if ctx.spec.name == "Bash" else None
    if operands is None:
        return False
    for word in operands:
        if command.name == "cd":
            spellings = _cd_spellings(analysis, index, word)
        else:
            spellings = analysis.relative_spellings(word)
        if _expanded(command, word) or not all(_inside(s, word, ctx, also_readable) for s in spellings):
            return False
    return True


def _plain_line(analysis: ShellAnalysis, ctx: CallContext) -> bool:
    if ctx.spec.name != "Bash" or not analysis.can_auto_allow:
        return False
    return not analysis.grouped and not analysis.unknown_directory


def _inputs_inside(analysis: ShellAnalysis, ctx: CallContext) -> bool:
    inputs = [target for target in analysis.redirect_paths if target not in analysis.output_redirects]
    return all(_inside(s, target, ctx) for target in inputs for s in analysis.relative_spellings(target))


def _words_inside(command: SimpleCommand, words: tuple[str, ...], analysis: ShellAnalysis, ctx: CallContext) -> bool:
    for word in words:
        if _expanded(command, word):
            return False
        if not all(_inside(s, word, ctx) for s in analysis.relative_spellings(word)):
            return False
    return True


def _expanded(command: SimpleCommand, word: str) -> bool:
    return word in command.unresolved and (word.startswith("~") or any(c in word for c in _EXPANSIONS))


def _cd_spellings(analysis: ShellAnalysis, index: int, word: str) -> list[str]:
    if word.startswith(("/", "~")):
        return [word]
    earlier = sum(1 for command in analysis.commands[:index] if command.name in ("cd", "pushd"))
    return [word, *(os.path.join(directory, word) for directory, _ in analysis.directories[:earlier])]


def _inside(spelling: str, word: str, ctx: CallContext, also: Readable | None = None) -> bool:
    """In a working directory as written and as resolved (a glob as written), or ``also`` says so."""
    path = ctx.resolver.normalise(spelling)
    if not path.known and not any(c in word for c in _GLOB):
        return False
    return inside_any(path, ctx.roots) or (also is not None and also(path))
