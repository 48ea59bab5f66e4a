"""`manage.py install_claude_hooks --settings PATH --server URL`: wire Claude Code to Gatehouse.

Adds one Gatehouse entry per hook event to a Claude Code settings file (user
`~/.claude/settings.json`, project `.claude/settings.json` or local
`.claude/settings.local.json`), keeping every other key and hook. Running it again
replaces our entries instead of adding more; `--uninstall` removes only ours.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from agent import install
from agent.install import (
    DEADLINE_MARGIN,
    GATES,
    TIMEOUT_MARGIN,
    http_hook,
    launcher,
    with_ours,
    without_ours,
    write_settings,
)
from approvals import selectors


def hook_command(options: dict[str, Any]) -> str | dict[str, Any]:
    server = options["server"].rstrip("/")
    if options["transport"] == "http":
        return http_hook(server, int(options["timeout"]), options["on_timeout"])
    if options["transport"] == "curl":
        max_time = int(options["timeout"])
        return (
            f'curl -sS --max-time {max_time} -H "Authorization: Bearer $GATEHOUSE_TOKEN" '
            f"--data-binary @- {shlex.quote(server + '/hooks/claude-code')}"
        )
    parts = [*launcher(hook_python(options), str(settings.BASE_DIR)), "--server", server]
    parts += ["--timeout", str(options["timeout"])]
    if options["on_timeout"] != "deny":
        parts += ["--on-timeout", options["on_timeout"]]
    if options["on_unreachable"] != "ask":
        parts += ["--on-unreachable", options["on_unreachable"]]
    if options["ask_locally"]:
        parts.append("--ask-locally")
    if options.get("send_prompt"):
        parts.append("--send-prompt")
    command = " ".join(shlex.quote(str(p)) for p in parts)
    if options["token_file"]:
        command = f"GATEHOUSE_TOKEN_FILE={shlex.quote(options['token_file'])} {command}"
    return command


def hook_python(options: dict[str, Any]) -> str:
    """The Python that runs the hook command: `--python`, else this one."""
    return str(options["python"] or sys.executable)


def compile_hook(python: str) -> bool:
    """Write the hook's bytecode into `agent/__pycache__` with the Python that runs it: a
    checkout its Claude Code user cannot write would otherwise compile the hook on every
    run. Hash-checked (PEP 552), like the bundle's (`agent.install.add_bytecode`): Python
    loads it only for the source it was compiled from. False when it could not be written."""
    agent = Path(settings.BASE_DIR) / "agent"
    compiling = [python, "-I", "-S", "-m", "compileall", "-q", "-l", "--invalidation-mode", "checked-hash", str(agent)]
    try:
        return subprocess.run(compiling, capture_output=True, timeout=60, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def read_settings(path: Path) -> dict[str, Any]:
    try:
        return install.read_settings(path)
    except install.SettingsError as exc:
        raise CommandError(str(exc)) from None


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
        parser.add_argument(
            "--gate",
            choices=list(GATES),
            default="pre-tool-use",
            help="pre-tool-use (default): every call before it runs; permission-request: only what "
            "Claude Code would prompt for (its own rules, modes and auto mode decide the rest)",
        )
        parser.add_argument(
            "--events", nargs="+", choices=GATES["pre-tool-use"], help="hook events to install (default: the gate's)"
        )
        parser.add_argument(
            "--transport",
            choices=("command", "http", "curl"),
            default="command",
            help="command (default): the hook command, which sends this machine's facts; http: Claude Code "
            "posts itself (no process per call, no facts: path rules ask); curl: curl as the command",
        )
        parser.add_argument(
            "--timeout",
            type=int,
            default=None,
            help="seconds the hook waits for a person (default: past the longest ask deadline the server sets)",
        )
        parser.add_argument(
            "--on-timeout",
            choices=("deny", "ask", "defer"),
            default="deny",
            help="a deadline never allows: deny, ask, or defer (headless `claude -p`: park the call until "
            "`claude -p --resume <session>`)",
        )
        parser.add_argument("--on-unreachable", choices=("ask", "deny", "allow"), default="ask")
        parser.add_argument("--ask-locally", action="store_true", help="let Claude Code prompt when Gatehouse asks")
        parser.add_argument(
            "--send-prompt",
            action="store_true",
            help="send the user's last prompt with each call, shown on the dashboard card (default: never sent)",
        )
        parser.add_argument("--token-file", default="", help="file holding the agent token (else GATEHOUSE_TOKEN)")
        parser.add_argument("--python", default="", help="Python that runs the hook (default: this one)")
        parser.add_argument("--curl", action="store_true", help="the same as --transport curl")
        parser.add_argument("--uninstall", action="store_true", help="remove Gatehouse's hooks, keep the rest")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["settings_path"]).expanduser()
        doc = read_settings(path)
        if options["uninstall"]:
            write_settings(path, without_ours(doc))
            self.stdout.write(f"Removed Gatehouse's hooks from {path}.")
            return
        try:
            longest = selectors.longest_ask_deadline()
        except DatabaseError as exc:
            raise CommandError(
                f"Could not read the asks' deadlines from the database ({exc}). "
                "Create its tables first: manage.py migrate (make run does)."
            ) from None
        if options["timeout"] is None:
            # Past every deadline the server may set, so the hook hears the deadline's
            # decision (and the ladder's steps happen while it waits) instead of giving up.
            options["timeout"] = longest + DEADLINE_MARGIN
        if options["timeout"] < 1:
            raise CommandError("--timeout must be at least 1 second")
        if options["timeout"] <= longest:
            self.stderr.write(
                f"Warning: asks may wait up to {longest} s (the longest deadline set now); "
                f"the hook gives up after {options['timeout']} s."
            )
        if options["curl"]:
            options["transport"] = "curl"
        events = options["events"] or list(GATES[options["gate"]])
        command = hook_command(options)
        try:
            doc = with_ours(doc, events, command, options["timeout"] + TIMEOUT_MARGIN)
        except install.SettingsError as exc:
            raise CommandError(str(exc)) from None
        write_settings(path, doc)
        self.stdout.write(f"Installed Gatehouse's hooks for {', '.join(events)} in {path}.")
        if options["transport"] == "command" and not compile_hook(hook_python(options)):
            self.stderr.write(
                f"Warning: could not write the hook's bytecode into {Path(settings.BASE_DIR) / 'agent'}: "
                "unless its Claude Code user can, the hook compiles itself on every call."
            )
        if options["transport"] == "http":
            self.stdout.write(
                "An http hook sends no facts of the agent's machine: calls a path rule would allow are asked."
            )
        self.stdout.write("Set GATEHOUSE_TOKEN (or GATEHOUSE_TOKEN_FILE) for Claude Code to the agent's token.")
