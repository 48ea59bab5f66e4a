"""Strip command wrappers (``timeout``, ``env``, ``sudo``, …) to find the real command."""

from __future__ import annotations

import os.path
from collections.abc import Sequence

from policy.shell.words import Word

# Per wrapper: options that take a separate argument, and how many leading positional
# arguments belong to the wrapper itself (``timeout 5 cmd`` → 1).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), 0),
    "sudo": (
        frozenset(
            {
                "-u",
                "-g",
                "-h",
                "-p",
                "-C",
                "-D",
                "-r",
                "-t",
                "-U",
                "-T",
                "--user",
                "--group",
                "--host",
                "--prompt",
                "--chdir",
            }
        ),
        0,
    ),
    "doas": (frozenset({"-u", "-C"}), 0),
    "xargs": (
        frozenset(
            {
                "-I",
                "-i",
                "-n",
                "-P",
                "-L",
                "-l",
                "-d",
                "-E",
                "-e",
                "-s",
                "-a",
                "--max-args",
                "--max-procs",
                "--delimiter",
                "--arg-file",
            }
        ),
        0,
    ),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "ionice": (frozenset({"-c", "-n", "-t", "-p"}), 0),
    "watch": (frozenset({"-n", "--interval", "-d"}), 0),
    "unbuffer": (frozenset(), 0),
    "chronic": (frozenset(), 0),
    "caffeinate": (frozenset({"-t", "-w"}), 0),
}
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish", "mksh", "ash", "busybox"})


def command_name(value: str) -> str:
    """The binary's basename: ``/bin/rm`` and ``./rm`` are both ``rm`` for deny purposes."""
    return os.path.basename(value) if "/" in value else value


def strip_wrappers(words: Sequence[Word]) -> tuple[list[Word], list[str], list[str]]:
    """Return the real command's words, the wrappers removed and env assignments seen."""
    rest = list(words)
    wrappers: list[str] = []
    assignments: list[str] = []
    while rest and not rest[0].dynamic:
        name = command_name(rest[0].value)
        spec = _WRAPPERS.get(name)
        if spec is None:
            break
        remaining = _skip_wrapper_args(rest[1:], spec, name, assignments)
        if not remaining:
            break
        wrappers.append(name)
        rest = remaining
    return rest, wrappers, assignments


def _skip_wrapper_args(
    args: list[Word], spec: tuple[frozenset[str], int], name: str, assignments: list[str]
) -> list[Word]:
    takes_value, positional = spec
    index = 0
    while index < len(args):
        value = args[index].value
        if value == "--":
            index += 1
            break
        if name == "env" and "=" in value and not value.startswith("-"):
            assignments.append(value)
        elif name == "nice" and value[:1] == "-" and value[1:].isdigit():
            pass
        elif not value.startswith("-") or value == "-":
            break
        elif value in takes_value:
            index += 1
        index += 1
    return args[index + positional :]


def shell_payload(words: Sequence[Word]) -> Word | None:
    """For ``bash -c PAYLOAD`` (also ``-lc``, ``-ec``) return the payload word."""
    if not words or command_name(words[0].value) not in SHELLS:
        return None
    for index, word in enumerate(words[1:], start=1):
        value = word.value
        if value.startswith("-") and not value.startswith("--") and "c" in value[1:]:
            return words[index + 1] if index + 1 < len(words) else None
        if not value.startswith("-"):
            return None
    return None
