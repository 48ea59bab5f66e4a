"""The hook prints a decision bound to its call, and fails closed on anything else.

A fake "Gatehouse" on 127.0.0.1 answers whatever a case says. Only a server that cannot
be reached (refused, no such name, no answer in time, 502/503/504 from a proxy) follows
`--on-unreachable`; every other answer is denied with its reason, even under
`--on-unreachable allow`. And stdout carries nothing but the hook's JSON.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.e2e.claude_code.hookrun import hook_input, run_hook
from tests.live import free_port

ALLOW_PRE = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
ALLOW_PERMISSION = {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}


class Script:
    """What the fake answers: status, body bytes, and whether to bind it to the call."""

    status = 200
    body = b"{}"
    binding: str | None = "right"  # "right", "wrong" or None (no header)
    silent = False


def fake_server(script: type[Script]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            sent = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if script.silent:
                threading.Event().wait(30)
                return
            self.send_response(script.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(script.body)))
            if script.binding == "right":
                self.send_header("Gatehouse-Answer-For", "sha256=" + hashlib.sha256(sent).hexdigest())
            elif script.binding == "wrong":
                self.send_header("Gatehouse-Answer-For", "sha256=" + hashlib.sha256(b"another call").hexdigest())
            self.end_headers()
            self.wfile.write(script.body)

        def log_message(self, *args: Any) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture
def fake() -> Iterator[tuple[str, type[Script]]]:
    class This(Script):
        pass

    server = fake_server(This)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", This
    server.shutdown()
    server.server_close()


def behavior_of(event: str, out: Any) -> str | None:
    if out is None:
        return None
    specific = out.get("hookSpecificOutput") or {}
    if event == "PreToolUse":
        return specific.get("permissionDecision")
    return (specific.get("decision") or {}).get("behavior") or ("ask" if "systemMessage" in out else None)


NOT_UNREACHABLE = [
    (400, b'{"error": {"code": "invalid", "message": "bad"}}', "right"),
    (401, b'{"error": {"code": "not_authenticated", "message": "token"}}', "right"),
    (403, b'{"error": {"code": "permission_denied", "message": "person"}}', "right"),
    (409, b'{"error": {"code": "tool_use_id_reused", "message": "reused"}}', "right"),
    (413, b'{"error": {"code": "too_large", "message": "big"}}', "right"),
    (500, b'{"error": {"code": "server", "message": "boom"}}', "right"),
    (500, b"<html>oops</html>", None),
    (200, b"not json", "right"),
    (200, b"[]", "right"),
    (200, b'"allow"', "right"),
    (200, json.dumps(ALLOW_PRE).encode(), None),
    (200, json.dumps(ALLOW_PRE).encode(), "wrong"),
    (200, json.dumps(ALLOW_PERMISSION).encode(), None),
    (200, json.dumps(ALLOW_PERMISSION).encode(), "wrong"),
    (200, b'{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "yes"}}', "right"),
    (200, b'{"hookSpecificOutput": {"hookEventName": "PostToolUse"}}', "right"),
    (200, b'{"continue": true}', "right"),
    (202, b'{"gatehouse": {"id": "x", "status": "pending"}}', "wrong"),
    (202, b'{"gatehouse": {"status": "done"}}', "right"),
    (204, b"", "right"),
    (302, b"{}", "right"),
    (418, b"{}", "right"),
]


class HookFailsClosedTests:
    @pytest.mark.parametrize("event", ["PreToolUse", "PermissionRequest"])
    @pytest.mark.parametrize(("status", "body", "binding"), NOT_UNREACHABLE)
    def test_an_answer_that_is_not_a_bound_decision_is_denied(
        self, fake: tuple[str, type[Script]], ci_bot: Any, event: str, status: int, body: bytes, binding: str | None
    ) -> None:
        url, script = fake
        script.status, script.body, script.binding = status, body, binding
        code, out, err = run_hook(
            url, ci_bot.token, hook_input(event), "--on-unreachable", "allow", "--timeout", "3", "--poll", "1"
        )
        assert code == 0, err
        assert behavior_of(event, out) == "deny", (status, body, binding, out, err)
        assert "Traceback" not in err

    @pytest.mark.parametrize("event", ["PreToolUse", "PermissionRequest"])
    def test_a_bound_allow_is_printed_as_it_came(self, fake: tuple[str, type[Script]], ci_bot: Any, event: str) -> None:
        url, script = fake
        script.body = json.dumps(ALLOW_PRE if event == "PreToolUse" else ALLOW_PERMISSION).encode()
        _code, out, _err = run_hook(url, ci_bot.token, hook_input(event))
        assert behavior_of(event, out) == "allow"


def unreachable_servers(fake_url: str) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        "refused": (f"http://127.0.0.1:{free_port()}", {}),
        "no such name": ("http://gatehouse.invalid", {}),
        "502": (fake_url, {"status": 502, "body": b"<html>bad gateway</html>", "binding": None}),
        "503": (fake_url, {"status": 503, "body": b"{}", "binding": None}),
        "504": (fake_url, {"status": 504, "body": b"", "binding": None}),
        "no answer in time": (fake_url, {"silent": True}),
    }


class HookUnreachableFollowsTheOptionTests:
    @pytest.mark.parametrize("case", ["refused", "no such name", "502", "503", "504", "no answer in time"])
    @pytest.mark.parametrize(("option", "expected"), [("ask", "ask"), ("deny", "deny"), ("allow", "allow")])
    @pytest.mark.parametrize("event", ["PreToolUse", "PermissionRequest"])
    def test_only_an_unreachable_server_follows_on_unreachable(
        self, fake: tuple[str, type[Script]], ci_bot: Any, case: str, option: str, expected: str, event: str
    ) -> None:
        url, script = fake
        server, setup = unreachable_servers(url)[case]
        for name, value in setup.items():
            setattr(script, name, value)
        started = time.monotonic()
        code, out, err = run_hook(
            server, ci_bot.token, hook_input(event), "--on-unreachable", option, "--timeout", "2", "--poll", "1"
        )
        took = time.monotonic() - started
        assert code == 0, err
        assert behavior_of(event, out) == expected, (case, out, err)
        assert "Traceback" not in err
        # Answered by its own --timeout (plus process start-up), never past it: Claude Code
        # kills a hook that outlives its configured timeout and then carries on undecided.
        assert took < 2 + 4, took


class HookStdoutTests:
    def test_stdout_is_one_json_line_or_nothing_whatever_happens(
        self, fake: tuple[str, type[Script]], ci_bot: Any
    ) -> None:
        import subprocess
        import sys

        from tests.e2e.claude_code.hookrun import ROOT, hook_env

        url, _script = fake
        cases: list[tuple[list[str], bytes]] = [
            (["--help"], b""),
            (["--on-timeout", "allow"], json.dumps(hook_input("PreToolUse")).encode()),
            (["--server", "ftp://x"], json.dumps(hook_input("PreToolUse")).encode()),
            (["--server", url], b"not json"),
            (["--server", url], b""),
            (["--server", url], json.dumps(hook_input("PostToolUse")).encode()),
        ]
        for args, stdin in cases:
            done = subprocess.run(
                [sys.executable, "-m", "agent.hook", *args],
                input=stdin,
                cwd=ROOT,
                env=hook_env(ci_bot.token),
                capture_output=True,
                timeout=30,
            )
            lines = done.stdout.splitlines()
            assert len(lines) <= 1, (args, done.stdout)
            if lines:
                assert isinstance(json.loads(lines[0]), dict), (args, done.stdout)
