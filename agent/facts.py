"""Gather the agent-machine facts a decision needs (standard library only).

Runs where the tool call will run (the hook, the SDK client, ``python -m policy
decide``), never on the server: the server decides on what this reports. For each call
it reports the home directory, the user name and, for every path the call may touch,
the lexically normalised absolute path, where it really leads, whether it exists and
whether it is a directory. The hook cannot parse shell, so for a command it reports
every word that could be a path: a superset of what the engine's analysis names.

Bounded: at most ``MAX_PATHS`` paths and ``BUDGET_SECONDS`` of work; past either,
``truncated`` is true and the engine asks about whatever it was not told.
"""

from __future__ import annotations

import getpass
import os
import os.path
import re
import shlex
import stat
import time
from collections.abc import Iterable, Mapping
from typing import Any

MAX_PATHS = 256
BUDGET_SECONDS = 0.05
MAX_PATH_CHARS = 4096  # longer paths are not reported (the engine asks about them)
MAX_WORDS = 2048  # words of a command considered at all (a huge command is truncated)
_PATH_FIELDS = ("file_path", "path", "notebook_path")
_SPLIT = re.compile(r"[\s;|&<>()`'\"{}]+")


def lexical_path(path: str, cwd: str, home: str) -> str:
    """``~``, relative segments and ``..`` against cwd, as the engine does it."""
    base = cwd if os.path.isabs(cwd) else "/"
    path = path.replace("\x00", "")
    if path == "~":
        path = home
    elif path.startswith("~/"):
        path = os.path.join(home, path[2:])
    elif path.startswith("~") and home not in ("", "/"):
        user, _, rest = path[1:].partition("/")  # ``~alice/x`` where alice owns home
        if user == os.path.basename(home.rstrip("/")):
            path = os.path.join(home, rest) if rest else home
    lexical = os.path.normpath(os.path.join(base, path))
    if lexical.startswith("//"):
        lexical = "/" + lexical.lstrip("/")
    return lexical


def real_path(lexical: str) -> str:
    """``os.path.realpath`` of a normalised absolute path, stopping early where it can.

    Until the first symlink every prefix is the path itself, and nothing below a
    missing component exists, so one ``lstat`` per component answers most paths; a
    symlink goes to the standard library, which stops on loops.
    """
    try:
        prefix = ""
        for name in lexical[1:].split("/"):
            prefix = f"{prefix}/{name}"
            try:
                mode = os.lstat(prefix).st_mode
            except (FileNotFoundError, NotADirectoryError):
                return lexical
            if stat.S_ISLNK(mode):
                return os.path.realpath(lexical)
        return lexical
    except (OSError, ValueError):
        try:
            return os.path.realpath(lexical)
        except (OSError, ValueError):
            return lexical


def path_fact(lexical: str) -> dict[str, Any]:
    """``{"real", "exists", "dir"}`` of one path; None where the disk would not say."""
    real = real_path(lexical)
    try:
        mode = os.stat(lexical).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return {"real": real, "exists": False, "dir": False}
    except (OSError, ValueError):
        return {"real": real, "exists": None, "dir": None}
    return {"real": real, "exists": True, "dir": stat.S_ISDIR(mode)}


def command_words(command: str) -> list[str]:
    """Every word of a shell command that could name a path (a superset, unparsed)."""
    words: list[str] = []
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words.extend(lexer)
    except ValueError:
        pass  # unbalanced quotes: the plain split below still sees every word
    words.extend(_SPLIT.split(command))
    found: list[str] = []
    for word in words[:MAX_WORDS]:
        for part in (word, word.split("=", 1)[-1]):
            if part and not part.startswith("-") and part not in found:
                found.append(part)
    return found


def call_paths(tool_name: str, tool_input: Mapping[str, Any], cwd: str) -> list[str]:
    """The paths a call names, as written (relative, ``~`` or absolute)."""
    paths: list[str] = []
    for name in _PATH_FIELDS:
        value = tool_input.get(name)
        if isinstance(value, str) and value:
            paths.append(value)
    first = paths[0] if paths else (cwd or "/")
    pattern = tool_input.get("pattern")
    if tool_name == "Glob" and isinstance(pattern, str):
        # The engine reads a Glob pattern's static base as a path too.
        static = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
        paths.append(os.path.join(first, os.path.dirname(static) or "/"))
    command = tool_input.get("command")
    if tool_name == "Bash" and isinstance(command, str):
        paths.extend(command_words(command))
    return paths


def gather(
    tool_name: str,
    tool_input: Mapping[str, Any],
    cwd: str,
    additional_directories: Iterable[str] = (),
    home: str | None = None,
) -> dict[str, Any]:
    """The ``facts`` object for one call, read from this machine's disk."""
    home = os.path.normpath(home or os.path.expanduser("~"))
    deadline = time.monotonic() + BUDGET_SECONDS
    wanted = [cwd or "/", *[d for d in additional_directories if isinstance(d, str)]]
    if isinstance(tool_input, Mapping):
        wanted += call_paths(tool_name, tool_input, cwd)
    paths: dict[str, dict[str, Any]] = {}
    truncated = False
    for written in wanted:
        lexical = lexical_path(written, cwd, home)
        if lexical in paths or len(lexical) > MAX_PATH_CHARS:
            continue
        if len(paths) >= MAX_PATHS or time.monotonic() > deadline:
            truncated = True
            break
        paths[lexical] = path_fact(lexical)
    reported_home = home if os.path.isabs(home) and len(home) <= MAX_PATH_CHARS else None
    return {"home": reported_home, "user": _user(), "paths": paths, "truncated": truncated}


def _user() -> str | None:
    try:
        return getpass.getuser()[:256]
    except (KeyError, OSError):
        return None
