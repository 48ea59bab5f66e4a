"""The commands Claude Code 2.1.332 runs without asking: read-only ones, and acceptEdits' file commands.

Grown from the differential recording (tests/policy/oracle), never guessed: a command, a
git subcommand or an option is here because Claude Code was recorded running it unasked
inside the working directories. Anything else — another option, a wrapper but
``timeout``, an option that writes or runs code (``find -exec``/``-delete``, ``sed -i``
outside acceptEdits, ``git -c``) — asks as before (stricter than Claude Code, whose own
lists are longer, until a recording shows it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from policy.shell.commands import SimpleCommand

_NUMBER = re.compile(r"-[0-9]+")


@dataclass(frozen=True)
class Shape:
    """The options and operands one command may carry and still run unasked."""

    flags: frozenset[str] = frozenset()
    # Options whose value is the next word (``find -name '*.py'``): not a path.
    valued: frozenset[str] = frozenset()
    # ``-5`` (``head -5``), ``-1`` (``git log -1``).
    number_flag: bool = False
    # Options that must be there (``sed`` only prints with ``-n``).
    required: frozenset[str] = frozenset()
    operands: bool = True
    min_operands: int = 0
    # Whether the operands name files (``echo`` only prints its words).
    files: bool = True


def _flags(*names: str) -> frozenset[str]:
    return frozenset(names)


# Read-only: run unasked in every mode.
READ_ONLY: dict[str, Shape] = {
    "ls": Shape(),
    "pwd": Shape(operands=False),
    "cat": Shape(),
    "head": Shape(number_flag=True),
    "wc": Shape(flags=_flags("-l")),
    "grep": Shape(flags=_flags("-r")),
    "find": Shape(valued=_flags("-name")),
    "sed": Shape(flags=_flags("-n"), required=_flags("-n")),
    "echo": Shape(files=False),
    "cd": Shape(min_operands=1),  # a bare ``cd`` goes home
}
READ_ONLY_GIT: dict[str, Shape] = {
    "status": Shape(operands=False),
    "diff": Shape(operands=False),
    "log": Shape(flags=_flags("--oneline"), number_flag=True, operands=False),
}
# What acceptEdits adds: file commands whose every path lies in the working directories
# (``tee``, recorded asking there, is not one of them).
FILE_COMMANDS: dict[str, Shape] = {
    "mkdir": Shape(min_operands=1),
    "touch": Shape(min_operands=1),
    "rm": Shape(flags=_flags("-r", "-f", "-rf", "-fr"), min_operands=1),
    "rmdir": Shape(min_operands=1),
    "mv": Shape(min_operands=2),
    "cp": Shape(min_operands=2),
    "sed": Shape(flags=_flags("-i"), required=_flags("-i"), min_operands=2),
}
# Wrappers Claude Code looks through when it decides a command runs unasked.
WRAPPERS = frozenset({"timeout"})


def read_operands(command: SimpleCommand) -> tuple[str, ...] | None:
    """The files ``command`` reads if it is read-only in Claude Code's terms, else None."""
    if not _plain(command):
        return None
    words = command.words
    if command.name == "git":
        if len(words) < 2 or words[1] not in READ_ONLY_GIT:
            return None  # also ``git -c …``, ``git --git-dir …``: global options first
        return _operands(READ_ONLY_GIT[words[1]], words[2:])
    shape = READ_ONLY.get(command.name)
    return _operands(shape, words[1:]) if shape is not None else None


def file_operands(command: SimpleCommand) -> tuple[str, ...] | None:
    """The files an acceptEdits file command (``mkdir``, ``rm -rf``, ``sed -i`` …) touches, else None."""
    shape = FILE_COMMANDS.get(command.name)
    if shape is None or not _plain(command):
        return None
    return _operands(shape, command.words[1:])


def _plain(command: SimpleCommand) -> bool:
    """No ``VAR=`` prefix, no wrapper but ``timeout``, and the program named, not a path to one."""
    if command.assignments or not set(command.wrappers) <= WRAPPERS or not command.words:
        return False
    # ``./ls``, ``~/bin/cat``: a program of that name, not the one on PATH.
    return not any("/" in word for word in (command.words[0], *command.full_words[:1]))


def _operands(shape: Shape, words: tuple[str, ...]) -> tuple[str, ...] | None:
    operands: list[str] = []
    seen: set[str] = set()
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in shape.valued:
            seen.add(word)
            skip = True
        elif word in shape.flags or (shape.number_flag and _NUMBER.fullmatch(word)):
            seen.add(word)
        elif word.startswith("-"):
            return None
        else:
            operands.append(word)
    if skip or not shape.required <= seen or len(operands) < shape.min_operands:
        return None
    if operands and not shape.operands:
        return None
    return tuple(operands) if shape.files else ()
