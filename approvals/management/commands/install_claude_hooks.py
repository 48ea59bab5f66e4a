"""`manage.py install_claude_hooks --settings PATH --server URL`: wire Claude Code to Gatehouse.

Adds one Gatehouse entry per hook event to a Claude Code settings file (user
`~/.claude/settings.json`, project `.claude/settings.json` or local
`.claude/settings.local.json`), keeping every other key and hook. Running it again
replaces our entries instead of adding more; `--uninstall` removes only ours.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

EVENTS = ("PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure")
DECIDING_EVENTS = ("PreToolUse", "PermissionRequest")
# How an entry is recognised as ours: the hook command, or the curl endpoint.
OUR_MARKERS = ("agent/hook.py", "agent.hook", "/hooks/claude-code")
# Claude Code counts a hook that outlives its timeout as no decision, so its timeout
# must leave the hook command time to apply --on-timeout and print.
TIMEOUT_MARGIN = 30


def is_ours(hook: Any) -> bool:
    command = hook.get("command", "") if isinstance(hook, dict) else ""
    return isinstance(command, str) and any(marker in command for marker in OUR_MARKERS)


def hook_command(options: dict[str, Any]) -> str:
    server = options["server"].rstrip("/")
    if options["curl"]:
        max_time = int(options["timeout"])
        return (
            f'curl -sS --max-time {max_time} -H "Authorization: Bearer $GATEHOUSE_TOKEN" '
            f"--data-binary @- {shlex.quote(server + '/hooks/claude-code')}"
        )
    script = Path(settings.BASE_DIR) / "agent" / "hook.py"
    parts = [options["python"] or sys.executable, str(script), "--server", server, "--timeout", str(options["timeout"])]
    if options["on_timeout"] != "deny":
        parts += ["--on-timeout", options["on_timeout"]]
    if options["on_unreachable"] != "ask":
        parts += ["--on-unreachable", options["on_unreachable"]]
    if options["ask_locally"]:
        parts.append("--ask-locally")
    command = " ".join(shlex.quote(str(p)) for p in parts)
    if options["token_file"]:
        command = f"GATEHOUSE_TOKEN_FILE={shlex.quote(options['token_file'])} {command}"
    return command


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


def with_ours(doc: dict[str, Any], events: list[str], command: str, timeout: int) -> dict[str, Any]:
    doc = without_ours(doc)
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise CommandError("the settings file's 'hooks' is not an object; fix it by hand first")
    for event in events:
        entry: dict[str, Any] = {"type": "command", "command": command, "timeout": timeout}
        if event in DECIDING_EVENTS:
            # A hook that crashes or times out blocks the call instead of letting Claude
            # Code run it alone. Exactly "block": Claude Code 2.1.332 drops the whole
            # settings file over a misspelt value.
            entry["onFailure"] = "block"
        hooks.setdefault(event, []).append({"matcher": "*", "hooks": [entry]})
    return doc


def read_settings(path: Path) -> dict[str, Any]:
    if not path.exists() or not path.read_text().strip():
        return {}
    try:
        doc = json.loads(path.read_text())
    except ValueError as exc:
        raise CommandError(f"{path} is not valid JSON ({exc}); nothing was changed") from None
    if not isinstance(doc, dict):
        raise CommandError(f"{path} is not a JSON object; nothing was changed")
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


class Command(BaseCommand):
    help = "Add (or with --uninstall remove) Gatehouse's hooks in a Claude Code settings file."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # `--settings` is Claude Code's word for its file; it replaces Django's
        # settings-module option for this command (DJANGO_SETTINGS_MODULE still works).
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        # `manage.py` hands a command-line `--settings` over as `--claude-settings`.
        parser.add_argument(
            "--claude-settings", "--settings", dest="settings_path", required=True, help="Claude Code settings file"
        )
        parser.set_defaults(settings=None)
        parser.add_argument("--server", default=settings.PUBLIC_URL, help="Gatehouse URL the agent reaches")
        parser.add_argument("--events", nargs="+", default=list(EVENTS), choices=EVENTS)
        parser.add_argument(
            "--timeout", type=int, default=300, help="seconds the hook waits for a person (default 300)"
        )
        parser.add_argument(
            "--on-timeout", choices=("deny", "ask"), default="deny", help="a deadline never allows (deny or ask)"
        )
        parser.add_argument("--on-unreachable", choices=("ask", "deny", "allow"), default="ask")
        parser.add_argument("--ask-locally", action="store_true", help="let Claude Code prompt when Gatehouse asks")
        parser.add_argument("--token-file", default="", help="file holding the agent token (else GATEHOUSE_TOKEN)")
        parser.add_argument("--python", default="", help="Python that runs the hook (default: this one)")
        parser.add_argument("--curl", action="store_true", help="use curl as the hook: nothing to install")
        parser.add_argument("--uninstall", action="store_true", help="remove Gatehouse's hooks, keep the rest")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["settings_path"]).expanduser()
        doc = read_settings(path)
        if options["uninstall"]:
            write_settings(path, without_ours(doc))
            self.stdout.write(f"Removed Gatehouse's hooks from {path}.")
            return
        if options["timeout"] < 1:
            raise CommandError("--timeout must be at least 1 second")
        command = hook_command(options)
        doc = with_ours(doc, options["events"], command, options["timeout"] + TIMEOUT_MARGIN)
        write_settings(path, doc)
        self.stdout.write(f"Installed Gatehouse's hooks for {', '.join(options['events'])} in {path}.")
        self.stdout.write("Set GATEHOUSE_TOKEN (or GATEHOUSE_TOKEN_FILE) for Claude Code to the agent's token.")
