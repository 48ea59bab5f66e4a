"""Warnings for the approver when a command may destroy data (not a decision)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from policy.shell.commands import SimpleCommand

_SQL = re.compile(r"\b(DROP\s+(TABLE|DATABASE|SCHEMA)|TRUNCATE\s+TABLE)\b", re.IGNORECASE)
_DELETE_ALL = re.compile(r"\bDELETE\s+FROM\s+\w+\s*(;|$|\"|')", re.IGNORECASE)
_FUNCTION_START = re.compile(r"\(\)\s*\{")
_NAME_BEFORE = re.compile(r"([\w:.-]{1,64})\s*$")


def _short_flags(words: Sequence[str]) -> str:
    return "".join(w[1:] for w in words if w.startswith("-") and not w.startswith("--"))


def _rm(words: Sequence[str]) -> str | None:
    flags = _short_flags(words[1:])
    recursive = "r" in flags or "R" in flags or "--recursive" in words
    force = "f" in flags or "--force" in words
    if recursive and force:
        return "rm -rf: recursively force-deletes files without confirmation"
    if recursive:
        return "rm -r: recursively deletes files"
    return None


def _git(words: Sequence[str]) -> str | None:
    sub = words[1] if len(words) > 1 else ""
    rest = words[2:]
    if sub == "push" and (
        any(w in ("--force", "-f", "--force-with-lease", "--mirror", "--delete") for w in rest)
        or any(w.startswith("+") for w in rest)
        or "f" in _short_flags(rest)
    ):
        return "git push --force: may overwrite remote history"
    if sub == "reset" and "--hard" in rest:
        return "git reset --hard: discards uncommitted changes"
    if sub == "clean" and ("f" in _short_flags(rest) or "--force" in rest):
        return "git clean -f: deletes untracked files"
    if sub in ("checkout", "restore") and ("." in rest or "--" in rest):
        return f"git {sub}: may discard uncommitted changes"
    if sub == "branch" and ("-D" in rest or ("--delete" in rest and "--force" in rest)):
        return "git branch -D: force-deletes a branch"
    if sub == "stash" and rest[:1] in (["drop"], ["clear"]):
        return "git stash drop/clear: permanently deletes stashed changes"
    return None


def _chmod(words: Sequence[str]) -> str | None:
    if any(w in ("777", "a+rwx", "o+w") for w in words) and ("R" in _short_flags(words[1:]) or "--recursive" in words):
        return "chmod -R 777: makes a whole tree world-writable"
    return None


def _dd(words: Sequence[str]) -> str | None:
    if any(w.startswith("of=") for w in words):
        return "dd of=: overwrites the target file or device"
    return None


def _find(words: Sequence[str]) -> str | None:
    if "-delete" in words or ("-exec" in words and "rm" in words):
        return "find -delete: deletes every matching file"
    return None


def _simple(message: str) -> Callable[[Sequence[str]], str | None]:
    return lambda words: message


_BY_NAME: dict[str, Callable[[Sequence[str]], str | None]] = {
    "rm": _rm,
    "git": _git,
    "chmod": _chmod,
    "chown": lambda w: "chown -R: changes ownership of a whole tree" if "R" in _short_flags(w[1:]) else None,
    "dd": _dd,
    "find": _find,
    "shred": _simple("shred: irrecoverably overwrites files"),
    "wipefs": _simple("wipefs: erases filesystem signatures"),
    "fdisk": _simple("fdisk: edits disk partitions"),
    "parted": _simple("parted: edits disk partitions"),
    "shutdown": _simple("shutdown: stops the machine"),
    "reboot": _simple("reboot: restarts the machine"),
    "halt": _simple("halt: stops the machine"),
    "terraform": lambda w: "terraform destroy: deletes infrastructure" if "destroy" in w else None,
    "kubectl": lambda w: "kubectl delete: deletes cluster resources" if "delete" in w else None,
}


def _is_fork_bomb(source: str) -> bool:
    """``name(){ name|name& }``: scan function openings only, so long input stays linear."""
    for index, match in enumerate(_FUNCTION_START.finditer(source)):
        if index >= 20:  # a real command line defines a handful of functions at most
            break
        before = _NAME_BEFORE.search(source[max(0, match.start() - 80) : match.start()])
        if before is None:
            continue
        name = re.escape(before.group(1))
        body = source[match.end() : match.end() + 200]
        if re.search(rf"{name}\s*\|\s*{name}", body):
            return True
    return False


def command_warning(command: SimpleCommand) -> str | None:
    """Return the warning for one simple command, if it is destructive."""
    name = command.name
    if name.startswith("mkfs"):
        return "mkfs: formats a filesystem, destroying its contents"
    check = _BY_NAME.get(name)
    return check(command.words) if check else None


def destructive_warning(source: str, commands: Sequence[SimpleCommand]) -> str | None:
    """Combine the warnings of every part of a command line into one sentence."""
    warnings: list[str] = []
    for command in commands:
        warning = command_warning(command)
        if warning and warning not in warnings:
            warnings.append(warning)
    if _SQL.search(source):
        warnings.append("SQL DROP/TRUNCATE: deletes database objects")
    elif _DELETE_ALL.search(source):
        warnings.append("SQL DELETE without WHERE: deletes every row")
    if _is_fork_bomb(source):
        warnings.append("fork bomb: spawns processes until the machine stalls")
    return "; ".join(warnings) if warnings else None
