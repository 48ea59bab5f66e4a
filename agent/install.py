"""Set up Claude Code on the agent's machine, without the server's checkout (stdlib only).

Gatehouse serves its hook as one file, ``GET /agent/gatehouse-hook.pyz`` (a Python
zip application holding ``agent/hook.py``, ``agent/facts.py`` and this module). On the
laptop::

    curl -fsSo ~/.gatehouse/gatehouse-hook.pyz --create-dirs "$GH/agent/gatehouse-hook.pyz"
    python3 ~/.gatehouse/gatehouse-hook.pyz install --server "$GH"

writes Claude Code settings whose paths exist on this machine: this Python and the file
where the bundle was saved (``launcher``), and adds this Python's bytecode to the bundle
(``add_bytecode``). Run without ``install``, the bundle is the hook command too.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import marshal
import os
import pkgutil
import shlex
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

EVENTS = ("PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure", "PermissionDenied")
DECIDING_EVENTS = ("PreToolUse", "PermissionRequest")
# What Gatehouse gates: every call before it runs (the default), or only what Claude Code
# itself would prompt for (its own rules, modes and auto mode decide the rest).
GATES = {
    "pre-tool-use": EVENTS,
    "permission-request": tuple(event for event in EVENTS if event != "PreToolUse"),
}
MARKERS = ("gatehouse-hook", "agent/hook.py", "agent.hook", "/hooks/claude-code")
# How long past the server's longest ask deadline the hook keeps waiting, so it hears
# the deadline's own decision (and the ladder's steps happen while it waits).
DEADLINE_MARGIN = 15
# What the serving Gatehouse wrote into the bundle it served (`GET /agent/gatehouse-hook.pyz`).
SERVER_DEFAULTS = "server_defaults.json"
TIMEOUT_MARGIN = 30  # Claude Code's own timeout outlasts the hook's, so the hook answers


def launcher(python: str, where: str) -> list[str]:
    """How every hook command the installers write starts: ``python`` runs the hook in
    ``where`` (the bundle, or the directory holding ``agent/``), isolated from the
    machine it runs on.

    - ``-I``: no ``PYTHON*`` variable (PYTHONPATH), no user site-packages, and neither the
      working directory nor a script's directory on ``sys.path``: a module the agent wrote
      into its project (a ``json.py``, an ``ssl.py``) or named in its environment is
      never imported in place of the standard library's (docs/SECURITY.md).
    - ``-S``: no ``site``: no site-packages, so no ``.pth`` file or ``sitecustomize`` runs
      in the hook (a project's virtualenv is the agent's to write). The hook is
      standard library only.
    - ``-c``: the hook is imported, not run as a script or a zip's ``__main__``: no
      ``runpy`` (about 4 ms a call), and its bytecode cached (``add_bytecode`` for the
      bundle, ``__pycache__`` beside ``agent/hook.py``) instead of compiled every run.
    """
    # A JSON string is a Python string literal too, in double quotes: the shell's single
    # quotes around the code then need no escapes for any ordinary path.
    return [
        python,
        "-I",
        "-S",
        "-c",
        f"import sys; sys.path.insert(0, {json.dumps(where)}); from agent.hook import main; main()",
    ]


def hook_command(bundle: Path, server: str, timeout: int, token_file: str) -> str:
    parts = [
        *launcher(sys.executable, str(bundle.resolve())),
        "--server",
        server.rstrip("/"),
        "--timeout",
        str(timeout),
    ]
    command = " ".join(shlex.quote(p) for p in parts)
    if token_file:
        command = f"GATEHOUSE_TOKEN_FILE={shlex.quote(token_file)} {command}"
    return command


def is_ours(hook: Any) -> bool:
    if not isinstance(hook, dict):
        return False
    where = hook.get("command") or hook.get("url") or ""
    return isinstance(where, str) and any(marker in where for marker in MARKERS)


def http_hook(server: str, timeout: int, on_timeout: str = "deny") -> dict[str, Any]:
    """A native `type: "http"` hook: Claude Code posts the hook input itself, no process per call.

    - It sends no agent facts (nothing runs on the agent's machine), so every allow that
      would rest on them, a path rule's for one, asks instead.
    - The token comes from GATEHOUSE_TOKEN in Claude Code's environment.
    """
    url = f"{server.rstrip('/')}/hooks/claude-code?wait={timeout}&on_timeout={on_timeout}"
    return {
        "type": "http",
        "url": url,
        "headers": {"Authorization": "Bearer $GATEHOUSE_TOKEN"},
        "allowedEnvVars": ["GATEHOUSE_TOKEN"],
    }


class SettingsError(ValueError):
    """The settings file cannot be edited safely; the message says why. Nothing was changed."""


def without_ours(doc: dict[str, Any]) -> dict[str, Any]:
    """The settings with every Gatehouse hook entry removed and nothing else touched."""
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return doc
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                remaining = [h for h in group["hooks"] if not is_ours(h)]
                if not remaining:
                    continue
                group = {**group, "hooks": remaining}
            kept.append(group)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del doc["hooks"]
    return doc


def with_ours(
    doc: dict[str, Any], events: Iterable[str], command: str | dict[str, Any], timeout: int
) -> dict[str, Any]:
    """``doc`` with any earlier Gatehouse hook replaced by this one on each event.

    - ``command``: the hook command, or a whole hook entry (``http_hook``).
    - ``timeout`` is Claude Code's for the entry: keep it above the hook's own.
    """
    doc = without_ours(doc)
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError("the settings file's 'hooks' is not an object; fix it by hand first")
    hook = {"type": "command", "command": command} if isinstance(command, str) else command
    for event in events:
        entry: dict[str, Any] = {**hook, "timeout": timeout}
        if event in DECIDING_EVENTS:
            # A hook that crashes or times out blocks the call instead of letting Claude
            # Code run it alone. Exactly "block": Claude Code 2.1.332 drops the whole
            # settings file over a misspelt value.
            entry["onFailure"] = "block"
        hooks.setdefault(event, []).append({"matcher": "*", "hooks": [entry]})
    return doc


def read_settings(path: Path) -> dict[str, Any]:
    """The settings file as a JSON object ({} when absent or empty); SettingsError otherwise."""
    if not path.exists() or not path.read_text().strip():
        return {}
    try:
        doc = json.loads(path.read_text())
    except ValueError as exc:
        raise SettingsError(f"{path} is not valid JSON ({exc}); nothing was changed") from None
    if not isinstance(doc, dict):
        raise SettingsError(f"{path} is not a JSON object; nothing was changed")
    return doc


def write_settings(path: Path, doc: dict[str, Any]) -> None:
    """Replace the file atomically, so Claude Code never reads half a settings file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(doc, handle, indent=2)
            handle.write("\n")
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def served_timeout(default: int = 300) -> int:
    """The hook timeout the serving Gatehouse put in this bundle: past its longest ask deadline."""
    try:
        data = pkgutil.get_data("agent", SERVER_DEFAULTS)
        timeout = json.loads(data or b"{}").get("timeout")
    except (OSError, ValueError):
        return default
    return timeout if isinstance(timeout, int) and timeout > 0 else default


def install(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gatehouse-hook.pyz install", description=__doc__)
    parser.add_argument("--server", required=True, help="the Gatehouse URL this machine reaches")
    parser.add_argument("--settings", default="~/.claude/settings.json", help="Claude Code settings file")
    parser.add_argument(
        "--timeout",
        type=int,
        default=served_timeout(),
        help="seconds the hook waits for a person (default: past the serving server's longest ask deadline)",
    )
    parser.add_argument("--token-file", default="", help="file holding the agent token (else GATEHOUSE_TOKEN)")
    args = parser.parse_args(argv)
    path = Path(os.path.expanduser(args.settings))
    bundle = Path(sys.argv[0])
    command = hook_command(bundle, args.server, args.timeout, args.token_file)
    try:
        write_settings(path, with_ours(read_settings(path), EVENTS, command, args.timeout + TIMEOUT_MARGIN))
    except SettingsError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"Gatehouse hooks written to {path}: {command}")
    if not add_bytecode(bundle):
        print(f"{bundle} could not be rewritten: each hook run compiles the hook first", file=sys.stderr)
    return 0


def add_bytecode(bundle: Path) -> bool:
    """Put this Python's bytecode of the bundle's modules into the bundle; False when it
    could not be rewritten (the hook then runs as before, compiling its modules).

    Python never caches bytecode for a module imported from a zip, so every hook run
    compiled ``agent/hook.py`` and ``agent/facts.py`` from source again: most of the
    bundle's start on top of the interpreter's (docs/PERFORMANCE.md, figure 4). Each
    module gets a ``.pyc`` beside its source in the zip, where zipimport looks first:

    - compiled by the interpreter the hook command names (``sys.executable``, this one);
      another Python (a different bytecode magic) skips them and compiles the source;
    - hash-checked (PEP 552): zipimport loads one only while its source in the zip is the
      source it was compiled from, so it can never run other code than the bundle holds;
    - the entries are stored uncompressed, and the file is replaced atomically: a hook
      run starting meanwhile reads the old bundle or the new one, never half of one. A
      link to the bundle is followed: the file rewritten is the one the command names.
    """
    bundle = bundle.resolve()
    try:
        with zipfile.ZipFile(bundle) as old:
            entries = {info.filename: old.read(info) for info in old.infolist() if not info.filename.endswith(".pyc")}
        fd, tmp = tempfile.mkstemp(dir=bundle.parent, prefix=f".{bundle.name}.")
    except (OSError, zipfile.BadZipFile):
        return False
    try:
        with os.fdopen(fd, "wb") as handle, zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED) as new:
            for name, data in entries.items():
                new.writestr(name, data)
                if name.endswith(".py"):
                    new.writestr(name[:-3] + ".pyc", hash_checked_pyc(data, f"{bundle}/{name}"))
        os.chmod(tmp, bundle.stat().st_mode & 0o777)
        os.replace(tmp, bundle)
    except (OSError, SyntaxError, ValueError):
        Path(tmp).unlink(missing_ok=True)
        return False
    return True


def hash_checked_pyc(source: bytes, filename: str) -> bytes:
    """A ``.pyc`` of ``source`` for this Python that its importer checks against the
    source (PEP 552: the magic, flags 0b11 = hash-based and checked, the source's hash, the code)."""
    code = compile(source, filename, "exec", dont_inherit=True)
    return (
        importlib.util.MAGIC_NUMBER
        + (0b11).to_bytes(4, "little")
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def main() -> None:
    """``python3 gatehouse-hook.pyz install …``: the bundle's ``__main__`` calls this for
    ``install``, and runs the hook (`agent.hook.main`) without loading this module otherwise."""
    sys.exit(install(sys.argv[2:]))
