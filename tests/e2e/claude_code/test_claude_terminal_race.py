"""The terminal as a surface in the race, with the real Claude Code 2.1.332 in a terminal.

An interactive session (under a pseudo-terminal, against the fake Anthropic API) shows its
own permission dialog while Gatehouse's PermissionRequest hook waits for a person, and
the person at the terminal answers first. What 2.1.332 does then, as measured here:

- "Yes": it runs the call at once and leaves the hook running, unsignalled, until the
  session ends (then SIGTERM) or the hook's own timeout. The call's PostToolUse is what
  tells Gatehouse: the ask ends as "answered at the terminal" with the call's result.
- Esc ("No"): the turn ends and the hook gets SIGTERM at once; the hook withdraws its
  ask as "answered at the terminal".

Either way no surface offers the ask any more.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.claude_code.cli import _cli_env, claude_bin, hook_command, hook_settings
from tests.e2e.claude_code.hookrun import pending_request, wait_until
from tests.fakes.anthropic_stream import FakeAnthropic, ScriptedToolUse, fake_anthropic
from tests.live import LiveServer, live_server

pytestmark = [pytest.mark.claude_cli, pytest.mark.django_db(transaction=True)]

EVENTS = ("PermissionRequest", "PostToolUse", "PostToolUseFailure")
ESCAPES = re.compile(r"\x1b\][^\x07]*\x07|\x1b\[[0-9;?>]*[a-zA-Z~]|\x1b[=>78]")


@pytest.fixture(autouse=True, scope="module")
def _claude_installed() -> None:
    if not os.path.exists(claude_bin()):
        pytest.fail(f"the Claude Code CLI is missing at {claude_bin()}: `make test` installs it")


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    with django_db_blocker.unblock(), live_server() as srv:
        yield srv


class Terminal:
    """Claude Code's interactive UI in a pseudo-terminal; what it draws, without escapes."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self._raw = b""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._closed = False
        self._status: int | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self.fd], [], [], 1)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                chunk = b""
            with self._changed:
                self._raw += chunk
                self._closed = not chunk
                self._changed.notify_all()
            if not chunk:
                return

    def text(self) -> str:
        """The screen's words with every space taken out (the UI moves the cursor instead)."""
        with self._lock:
            raw = self._raw.decode("utf-8", "replace")
        return re.sub(r"\s", "", ESCAPES.sub("", raw))

    def wait_for(self, words: str, timeout: float = 60) -> None:
        wanted = re.sub(r"\s", "", words)
        with self._changed:
            ok = self._changed.wait_for(lambda: self._closed or wanted in self.text_unlocked(), timeout=timeout)
        assert ok and wanted in self.text(), f"the terminal never showed {words!r}: …{self.text()[-600:]}"

    def text_unlocked(self) -> str:
        return re.sub(r"\s", "", ESCAPES.sub("", self._raw.decode("utf-8", "replace")))

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def exited(self) -> bool:
        if self._status is None and os.waitpid(self.pid, os.WNOHANG)[0] == self.pid:
            self._status = 0
        return self._status is not None

    def close(self) -> None:
        if not self.exited():
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


# A PermissionRequest hook that only notes when it starts and which signals it gets.
LISTENING_HOOK = """
import signal, sys, time
log = open(sys.argv[1], "a", buffering=1)
def noted(number, frame):
    log.write(f"signal {number}\\n")
    sys.exit(0)
for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(number, noted)
sys.stdin.read()
log.write("started\\n")
time.sleep(120)
log.write("timed out\\n")
"""


def listening_session(tmp_path: Path) -> tuple[Path, Path, dict[str, Any], ScriptedToolUse]:
    """A project, the listening hook's log, settings running it on PermissionRequest, a call."""
    project = tmp_path / "project"
    project.mkdir()
    script, log = tmp_path / "listening_hook.py", tmp_path / "hook.log"
    script.write_text(LISTENING_HOOK)
    log.touch()
    settings = hook_settings(f"{sys.executable} {script} {log}", events=("PermissionRequest",), timeout=120)
    call = ScriptedToolUse("Bash", {"command": f"touch {project}/marker", "description": "Create the marker"})
    return project, log, settings, call


def interactive_claude(
    fake: FakeAnthropic, home: Path, project: Path, settings: dict[str, Any], token: str
) -> Terminal:
    """`claude` in a terminal, past its first-run screens, in default mode (2.1.332 starts in auto)."""
    config = home / ".claude"
    config.mkdir(parents=True)
    (config / ".claude.json").write_text(
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "theme": "dark",
                "customApiKeyResponses": {"approved": ["test"], "rejected": []},
                "projects": {str(project): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}},
            }
        )
    )
    settings_path = home / "gatehouse-settings.json"
    settings_path.write_text(json.dumps(settings))
    env = {**_cli_env(fake, home, token), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    argv = [claude_bin(), "--permission-mode", "default", "--settings", str(settings_path), "Do the task."]
    pid, fd = pty.fork()
    if pid == 0:  # the child: become Claude Code
        try:
            os.chdir(project)
            os.execve(argv[0], argv, env)  # noqa: S606 - the CLI itself, in the terminal pty.fork made
        finally:
            os._exit(127)
    return Terminal(pid, fd)


class TerminalAnswersFirstTests:
    def test_a_yes_leaves_the_hook_running_until_the_session_ends(self, tmp_path: Path, ci_bot: Any) -> None:
        """The facts the rest rests on, with a hook that only listens: "Yes" runs the call
        and leaves the hook waiting; only the session's end sends it SIGTERM."""
        project, log, settings, call = listening_session(tmp_path)
        with fake_anthropic(call) as fake:
            terminal = interactive_claude(fake, tmp_path / "home", project, settings, ci_bot.token)
            try:
                terminal.wait_for("Do you want to proceed?")
                wait_until(lambda: "started" in log.read_text(), timeout=60, what="the hook to start")
                terminal.type("\r")  # "1. Yes", at the terminal
                assert fake.tool_result_seen.wait(60), "the call never ran"
                terminal.wait_for(call.final_text)  # the model's next turn: the call is long over
                assert (project / "marker").exists()
                assert log.read_text() == "started\n", "Claude Code signalled the hook when its dialog was answered"
                terminal.type("/exit\r")
                wait_until(terminal.exited, timeout=60, what="the session to end")
                wait_until(lambda: "signal" in log.read_text(), timeout=30, what="the hook to be stopped")
            finally:
                terminal.close()
        assert log.read_text() == f"started\nsignal {int(signal.SIGTERM)}\n"

    def test_a_refusal_at_the_terminal_sends_the_hook_sigterm_at_once(self, tmp_path: Path, ci_bot: Any) -> None:
        """Esc ("No") at the dialog ends the turn, and with it the waiting hook: SIGTERM."""
        project, log, settings, call = listening_session(tmp_path)
        with fake_anthropic(call) as fake:
            terminal = interactive_claude(fake, tmp_path / "home", project, settings, ci_bot.token)
            try:
                terminal.wait_for("Do you want to proceed?")
                wait_until(lambda: "started" in log.read_text(), timeout=60, what="the hook to start")
                terminal.type("\x1b")  # Esc, at the terminal
                wait_until(lambda: "signal" in log.read_text(), timeout=30, what="the hook to be stopped")
                assert not terminal.exited()  # the session goes on; only the turn ended
            finally:
                terminal.close()
        assert log.read_text() == f"started\nsignal {int(signal.SIGTERM)}\n"
        assert not (project / "marker").exists() and not fake.tool_results

    def test_a_yes_at_the_terminal_ends_the_ask_everywhere_by_post_tool_use(
        self, server: LiveServer, tmp_path: Path, ci_bot: Any
    ) -> None:
        from approvals.models import Decision, PermissionRequest

        project = tmp_path / "project"
        project.mkdir()
        call = ScriptedToolUse("Bash", {"command": f"touch {project}/marker", "description": "Create the marker"})
        settings = hook_settings(hook_command(server.url), events=EVENTS)
        with fake_anthropic(call) as fake:
            terminal = interactive_claude(fake, tmp_path / "home", project, settings, ci_bot.token)
            try:
                # Both wait at once: Claude Code's dialog and Gatehouse's ask.
                terminal.wait_for("Do you want to proceed?")
                request = wait_until(pending_request, timeout=60, what="Gatehouse's ask")
                assert request.tool_name == "Bash" and request.tool_input["command"] == call.input["command"]
                terminal.type("\r")  # "1. Yes", at the terminal

                def ran() -> PermissionRequest | None:
                    request.refresh_from_db()
                    return request if request.result_at is not None else None

                wait_until(ran, timeout=60, what="PostToolUse to reach Gatehouse")
                assert fake.tool_result_seen.wait(60), "the model never heard the call's result"
                # Ended while the session goes on: by PostToolUse, not by the session's end.
                assert not terminal.exited()
            finally:
                terminal.close()
        assert (project / "marker").exists()
        assert request.state == "cancelled"
        [row] = Decision.objects.filter(request=request)
        assert row.reason_type == "cancelled" and "answered at the terminal" in row.message
        assert "(answered at the terminal)" in request.outcome_sentence(row)
        assert request.result is not None and request.result["ok"] is True
        assert not fake.tool_result_is_error(), fake.tool_result_text()

    def test_a_refusal_at_the_terminal_withdraws_the_ask_through_the_hook(
        self, server: LiveServer, tmp_path: Path, ci_bot: Any
    ) -> None:
        from approvals.models import Decision, PermissionRequest

        project = tmp_path / "project"
        project.mkdir()
        call = ScriptedToolUse("Bash", {"command": f"touch {project}/marker", "description": "Create the marker"})
        settings = hook_settings(hook_command(server.url), events=EVENTS)
        with fake_anthropic(call) as fake:
            terminal = interactive_claude(fake, tmp_path / "home", project, settings, ci_bot.token)
            try:
                terminal.wait_for("Do you want to proceed?")
                request = wait_until(pending_request, timeout=60, what="Gatehouse's ask")
                terminal.type("\x1b")  # Esc, at the terminal: the hook gets SIGTERM

                def ended() -> PermissionRequest | None:
                    request.refresh_from_db()
                    return request if request.state != "pending" else None

                wait_until(ended, timeout=30, what="the hook to withdraw the ask")
                assert not terminal.exited()
            finally:
                terminal.close()
        assert not (project / "marker").exists() and not fake.tool_results
        assert request.state == "cancelled" and request.result_at is None
        [row] = Decision.objects.filter(request=request)
        assert row.reason_type == "cancelled" and "answered at the terminal" in row.message
