"""Set up Claude Code on the agent's machine, without the server's checkout (stdlib only).

Gatehouse serves its hook as one file, ``GET /agent/gatehouse-hook.pyz`` (a Python
zip application holding ``agent/hook.py``, ``agent/facts.py`` and this module). On the
laptop::

    curl -fsSo ~/.gatehouse/gatehouse-hook.pyz --create-dirs "$GH/agent/gatehouse-hook.pyz"
    python3 ~/.gatehouse/gatehouse-hook.pyz install --server "$GH"

writes Claude Code settings whose paths exist on this machine: this Python and the file
where the bundle was saved. Run without ``install``, the bundle is the hook command.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

EVENTS = ("PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure")
DECIDING_EVENTS = ("PreToolUse", "PermissionRequest")
MARKERS = ("gatehouse-hook", "agent/hook.py", "agent.hook", "/hooks/claude-code")
TIMEOUT_MARGIN = 30  # Claude Code's own timeout outlasts the hook's, so the hook answers


def hook_command(bundle: Path, server: str, timeout: int, token_file: str) -> str:
    parts = [sys.executable, str(bundle.resolve()), "--server", server.rstrip("/"), "--timeout", str(timeout)]
    command = " ".join(shlex.quote(p) for p in parts)
    if token_file:
        command = f"GATEHOUSE_TOKEN_FILE={shlex.quote(token_file)} {command}"
    return command


def _ours(hook: Any) -> bool:
    command = hook.get("command", "") if isinstance(hook, dict) else ""
    return isinstance(command, str) and any(marker in command for marker in MARKERS)


def with_hooks(doc: dict[str, Any], command: str, timeout: int) -> dict[str, Any]:
    """``doc`` with any earlier Gatehouse hook replaced by this one, on every event."""
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SystemExit("the settings file's 'hooks' is not an object; fix it by hand first")
    for event in EVENTS:
        kept = []
        for group in hooks.get(event) or []:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                group = {**group, "hooks": [h for h in group["hooks"] if not _ours(h)]}
                if not group["hooks"]:
                    continue
            kept.append(group)
        entry: dict[str, Any] = {"type": "command", "command": command, "timeout": timeout + TIMEOUT_MARGIN}
        if event in DECIDING_EVENTS:
            entry["onFailure"] = "block"  # a crashed hook blocks the call, never lets it run
        hooks[event] = [*kept, {"matcher": "*", "hooks": [entry]}]
    return doc


def write_settings(path: Path, doc: dict[str, Any]) -> None:
    """Replace the file atomically, so Claude Code never reads half a settings file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(doc, handle, indent=2)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gatehouse-hook.pyz install", description=__doc__)
    parser.add_argument("--server", required=True, help="the Gatehouse URL this machine reaches")
    parser.add_argument("--settings", default="~/.claude/settings.json", help="Claude Code settings file")
    parser.add_argument("--timeout", type=int, default=300, help="seconds the hook waits for a person")
    parser.add_argument("--token-file", default="", help="file holding the agent token (else GATEHOUSE_TOKEN)")
    args = parser.parse_args(argv)
    path = Path(os.path.expanduser(args.settings))
    try:
        doc = json.loads(path.read_text()) if path.exists() and path.read_text().strip() else {}
    except ValueError as exc:
        print(f"{path} is not valid JSON ({exc}); nothing was changed", file=sys.stderr)
        return 1
    if not isinstance(doc, dict):
        print(f"{path} is not a JSON object; nothing was changed", file=sys.stderr)
        return 1
    bundle = Path(sys.argv[0])
    command = hook_command(bundle, args.server, args.timeout, args.token_file)
    write_settings(path, with_hooks(doc, command, args.timeout))
    print(f"Gatehouse hooks written to {path}: {command}")
    return 0


def main() -> None:
    """The bundle's entry point: ``install …`` sets up; anything else runs the hook."""
    if sys.argv[1:2] == ["install"]:
        sys.exit(install(sys.argv[2:]))
    from agent.hook import main as hook_main

    hook_main()
