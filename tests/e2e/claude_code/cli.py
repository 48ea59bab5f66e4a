"""Run the real Claude Code CLI headless, isolated, against the fake Anthropic API."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.claude_code.hookrun import ROOT
from tests.fakes.anthropic_stream import FakeAnthropic

HOOK_EVENTS = ("PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure")


def claude_bin() -> str:
    return os.environ.get("GATEHOUSE_CLAUDE_BIN") or str(ROOT / ".tools" / "node_modules" / ".bin" / "claude")


def hook_command(server: str, *args: str) -> str:
    return " ".join(shlex.quote(p) for p in (sys.executable, "-m", "agent.hook", "--server", server, *args))


def curl_command(server: str, max_time: int = 60) -> str:
    return (
        f'curl -sS --max-time {max_time} -H "Authorization: Bearer $GATEHOUSE_TOKEN" '
        f"--data-binary @- {server}/hooks/claude-code"
    )


def hook_settings(command: str, events: tuple[str, ...] = HOOK_EVENTS, timeout: int = 60) -> dict[str, Any]:
    """A Claude Code settings document that runs `command` for each event."""
    entry = {"type": "command", "command": command, "timeout": timeout}
    return {"hooks": {event: [{"matcher": "*", "hooks": [entry]}] for event in events}}


def _write_settings(home: Path, settings: dict[str, Any]) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "gatehouse-settings.json"
    path.write_text(json.dumps(settings))
    return path


def _cli_env(fake: FakeAnthropic, home: Path, token: str) -> dict[str, str]:
    """The CLI's environment: its own home, the fake API, no telemetry, nothing of ours leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "GATEHOUSE_"))}
    env.update(
        HOME=str(home),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        ANTHROPIC_BASE_URL=fake.url,
        ANTHROPIC_API_KEY="test",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL="1",
        GATEHOUSE_TOKEN=token,
        PYTHONPATH=str(ROOT),
    )
    return env


@dataclass
class ClaudeRun:
    returncode: int
    stdout: str
    stderr: str

    def messages(self) -> list[dict[str, Any]]:
        out = []
        for line in self.stdout.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def result(self) -> dict[str, Any]:
        return next((m for m in self.messages() if m.get("type") == "result"), {})


def run_claude(
    fake: FakeAnthropic,
    home: Path,
    project: Path,
    settings: dict[str, Any],
    *,
    token: str,
    prompt: str = "Do the task.",
    timeout: float = 120,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> ClaudeRun:
    """One headless turn: `claude -p` with our hooks, talking to nothing but 127.0.0.1."""
    settings_path = _write_settings(home, settings)
    done = subprocess.run(
        [
            claude_bin(),
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--settings",
            str(settings_path),
            *args,
        ],
        cwd=project,
        env={**_cli_env(fake, home, token), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return ClaudeRun(done.returncode, done.stdout, done.stderr)


@dataclass
class StreamingRun(ClaudeRun):
    # The permission prompts Claude Code sent its SDK client (each was answered deny).
    control_requests: list[dict[str, Any]]


def run_claude_streaming(
    fake: FakeAnthropic,
    home: Path,
    project: Path,
    settings: dict[str, Any],
    *,
    token: str,
    prompt: str = "Do the task.",
    timeout: float = 120,
) -> StreamingRun:
    """One turn as the Agent SDK drives it: stream-json in and out, prompts sent to the client.

    `claude -p` alone turns AskUserQuestion off (nobody could answer it); with
    `--permission-prompt-tool stdio` the client answers, as an IDE or the SDK does. Every
    `can_use_tool` prompt is recorded and denied, so a test sees whether Claude Code
    asked at all.
    """
    settings_path = _write_settings(home, settings)
    command = [claude_bin(), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    command += ["--permission-prompt-tool", "stdio", "--settings", str(settings_path)]
    process = subprocess.Popen(
        command,
        cwd=project,
        env=_cli_env(fake, home, token),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    killer = threading.Timer(timeout, process.kill)
    killer.start()
    lines, prompts = [], []
    try:
        user = {"type": "user", "message": {"role": "user", "content": prompt}}
        process.stdin.write(json.dumps(user) + "\n")
        process.stdin.flush()
        for line in process.stdout:
            lines.append(line)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("type") == "control_request":
                prompts.append(message)
                answer = {"behavior": "deny", "message": "denied by the test's client"}
                reply = {"subtype": "success", "request_id": message.get("request_id"), "response": answer}
                process.stdin.write(json.dumps({"type": "control_response", "response": reply}) + "\n")
                process.stdin.flush()
            if message.get("type") == "result":
                break
        process.stdin.close()
        process.wait(timeout=30)
    finally:
        killer.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
    return StreamingRun(process.returncode, "".join(lines), process.stderr.read(), prompts)
