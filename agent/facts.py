"""Gather the agent-machine facts a decision needs (standard library only).

Runs where the tool call will run (the hook, the SDK client, ``python -m policy
decide``), never on the server: the server decides on what this reports. For each call
it reports the home directory, the user name and, for every path the call may touch,
the lexically normalised absolute path, where it really leads, whether it exists and
whether it is a directory. The hook cannot parse shell, so for a command it reports
every word that could be a path: a superset of what the engine's analysis names.

The hook imports this on every tool call, so it imports nothing beyond what the
interpreter has already loaded (no ``re``, ``shlex``, ``json`` or ``typing``).

Bounded: at most ``MAX_PATHS`` paths and ``BUDGET_SECONDS`` of work; past either,
``truncated`` is true and the engine asks about whatever it was not told.
"""

from __future__ import annotations

import os
import os.path
import stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # the hook imports this module on every call: no typing at run time
    from collections.abc import Iterable, Mapping
    from typing import Any

MAX_PATHS = 256
BUDGET_SECONDS = 0.05
MAX_PATH_CHARS = 4096  # longer paths are not reported (the engine asks about them)
MAX_WORDS = 2048  # words of a command considered at all (a huge command is truncated)
_PATH_FIELDS = ("file_path", "path", "notebook_path")
_SEPARATORS = frozenset(" \t\n\r;|&<>()`")


def lexical_path(path: str, cwd: str, home: str) -> str:
    """``~``, relative segments and ``..`` against cwd, as the engine does it."""
    base = cwd if os.path.isabs(cwd) else "/"
    path = path.replace("\x00", "")
    if path == "~":
        path = home
    elif path.startswith("~/"):
        path = os.path.join(home, path[2:].lstrip("/"))  # ``~//x`` is under home too
    elif path.startswith("~") and home not in ("", "/"):
        user, _, rest = path[1:].partition("/")  # ``~alice/x`` where alice owns home
        if user == os.path.basename(home.rstrip("/")):
            path = os.path.join(home, rest.lstrip("/")) if rest else home
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
    """Every word of a shell command that could name a path (a superset, unparsed).

    Quotes join a word and are dropped, a backslash keeps the next character, and any
    shell operator ends a word; ``--out=file`` and ``VAR=path`` also give their value.
    """
    words: list[str] = []
    word: list[str] = []
    quote = ""
    escaped = False
    for char in command[: MAX_WORDS * 64]:
        if escaped:
            word.append(char)
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            if char == quote:
                quote = ""
            else:
                word.append(char)
        elif char in "'\"":
            quote = char
        elif char in _SEPARATORS:
            _end_word(words, word)
        else:
            word.append(char)
    _end_word(words, word)
    found: list[str] = []
    for text in words[:MAX_WORDS]:
        for part in (text, text.split("=", 1)[-1]):
            if part and not part.startswith("-") and part not in found:
                found.append(part)
    return found


def _end_word(words: list[str], word: list[str]) -> None:
    if word:
        words.append("".join(word))
        word.clear()


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
    budget: float = BUDGET_SECONDS,
) -> dict[str, Any]:
    """The ``facts`` object for one call, read from this machine's disk within ``budget`` seconds."""
    home = os.path.normpath(home or os.path.expanduser("~"))
    deadline = time.monotonic() + budget
    wanted = [cwd or "/", *[d for d in additional_directories if isinstance(d, str)]]
    if isinstance(tool_input, dict):
        for written in call_paths(tool_name, tool_input, cwd):
            wanted.append(written)
            if "$HOME" in written or "${HOME}" in written:
                # The engine reads ``$HOME`` as the reported home, as the shell will.
                wanted.append(written.replace("${HOME}", home).replace("$HOME", home))
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
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if os.environ.get(name):
            return os.environ[name][:256]
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name[:256]
    except (ImportError, KeyError, OSError):
        return None


def with_facts(body: bytes, hook_input: Mapping[str, Any]) -> bytes:
    """The hook's request body with this machine's ``facts`` added; unchanged on any fault.

    Spliced in rather than re-encoded, so the hook need not import ``json``: a hook
    input is one JSON object, and ``facts`` is only strings, booleans and null.
    """
    text = body.rstrip()
    if not text.endswith(b"}") or "facts" in hook_input:
        return body
    try:
        tool_input = hook_input.get("tool_input")
        cwd = hook_input.get("cwd")
        facts = gather(
            str(hook_input.get("tool_name", "")),
            tool_input if isinstance(tool_input, dict) else {},
            cwd if isinstance(cwd, str) else "",
        )
        encoded = _json(facts).encode("ascii")
    except Exception:  # no facts is safe: the server asks about what it was not told
        return body
    separator = b"," if text[:-1].strip() not in (b"{", b"") else b""
    return text[:-1] + separator + b'"facts":' + encoded + b"}"


def _json(value: object) -> str:
    """JSON for strings, booleans, null and objects of them (all that facts hold)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(str(k))}:{_json(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"facts hold no {type(value).__name__}")


def _string(text: str) -> str:
    try:
        from _json import encode_basestring_ascii
    except ImportError:  # another Python: the slower, complete encoder
        import json

        return json.dumps(text)
    return str(encode_basestring_ascii(text))
