"""Shared helpers for the hook tests: hook inputs as Claude Code sends them, and a runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def hook_input(event: str, command: str = "rm -rf build", *, session: str = "sess-1", **extra: Any) -> dict[str, Any]:
    """A Bash hook input shaped like Claude Code 2.1.x's (PermissionRequest has no tool_use_id)."""
    body: dict[str, Any] = {
        "session_id": session,
        "transcript_path": f"/tmp/claude/{session}.jsonl",
        "cwd": "/tmp/proj",
        "prompt_id": str(uuid.uuid4()),
        "permission_mode": "default",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "test"},
    }
    if event != "PermissionRequest":
        body["tool_use_id"] = f"toolu_{uuid.uuid4().hex[:20]}"
    body.update(extra)
    return body


def hook_env(token: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
    env.update(GATEHOUSE_TOKEN=token, PYTHONPATH=str(ROOT))
    env.update(extra)
    return env


def start_hook(server: str, token: str, body: dict[str, Any], *args: str, **env: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "agent.hook", "--server", server, *args],
        cwd=ROOT,
        env=hook_env(token, **env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None
    process.stdin.write(json.dumps(body))
    process.stdin.close()
    return process


def finish(process: subprocess.Popen[str], timeout: float = 60) -> tuple[int, Any, str]:
    """Exit code, parsed stdout (None when empty) and stderr of a started hook."""
    try:
        process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.stdout is not None and process.stderr is not None
    out, err = process.stdout.read(), process.stderr.read()
    return process.returncode, (json.loads(out) if out.strip() else None), err


def run_hook(server: str, token: str, body: dict[str, Any], *args: str, **env: str) -> tuple[int, Any, str]:
    return finish(start_hook(server, token, body, *args, **env))


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def pending_request(tool_use_id: str | None = None) -> Any:
    from approvals.models import PermissionRequest

    requests = PermissionRequest.objects.filter(state="pending")
    if tool_use_id:
        requests = requests.filter(tool_use_id=tool_use_id)
    return requests.first()
