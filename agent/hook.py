"""Claude Code hook command: `python -m agent.hook --server URL`.

Reads one hook input JSON on stdin (PreToolUse, PermissionRequest, PostToolUse,
PostToolUseFailure), asks Gatehouse (`POST /hooks/claude-code`), and prints the hook
output Claude Code honours. Standard library only and no Django, so it starts fast:
Claude Code runs it before every tool call.

Contracts matched here (Claude Code 2.1.x):
- A hook that outlives its configured `timeout`, or exits 1, counts as no decision and
  Claude Code carries on, so this command answers before its own `--timeout` (keep it
  shorter than the hook timeout) and then applies `--on-timeout` (default deny).
- Claude Code kills a PermissionRequest hook whose race its own dialog won; on
  SIGTERM/SIGINT/SIGHUP the pending request is withdrawn ("answered locally").
- Nothing here may print a traceback into the transcript: any fault applies
  `--on-unreachable` (default ask: print nothing, Claude Code prompts locally) with one
  line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

DEFAULT_SERVER = "http://127.0.0.1:8000"
DECIDING_EVENTS = ("PreToolUse", "PermissionRequest")
RECORDING_EVENTS = ("PostToolUse", "PostToolUseFailure")
# Each long-poll stays well under common proxy idle timeouts (often 30-60 s).
POLL_CHUNK = 25.0
# How long to keep trying a server we have never reached before giving up on it.
CONNECT_RETRY = 5.0
TRANSIENT_STATUS = (502, 503, 504)


class Unreachable(Exception):
    """Gatehouse could not be reached or answered something unusable."""


class Interrupted(BaseException):
    """Claude Code stopped the hook (SIGTERM/SIGINT/SIGHUP)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agent.hook", description="Gatehouse hook for Claude Code.")
    parser.add_argument("--server", default=os.environ.get("GATEHOUSE_URL") or DEFAULT_SERVER)
    parser.add_argument(
        "--timeout", type=float, default=float(os.environ.get("GATEHOUSE_HOOK_TIMEOUT") or 300),
        help="seconds to wait for a decision; keep it shorter than the hook timeout in Claude Code",
    )
    parser.add_argument("--on-timeout", choices=("deny", "ask", "allow"), default="deny")
    parser.add_argument("--on-unreachable", choices=("ask", "deny", "allow"), default="ask")
    parser.add_argument(
        "--ask-locally", action="store_true",
        help="when Gatehouse says ask, let Claude Code prompt locally instead of waiting for a remote answer",
    )
    parser.add_argument("--poll", type=float, default=POLL_CHUNK, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def read_token() -> str:
    token = os.environ.get("GATEHOUSE_TOKEN", "").strip()
    path = os.environ.get("GATEHOUSE_TOKEN_FILE", "")
    if not token and path:
        with open(path, encoding="utf-8") as handle:
            token = handle.read().strip()
    if not token:
        raise Unreachable("no token: set GATEHOUSE_TOKEN or GATEHOUSE_TOKEN_FILE")
    return token


class Gatehouse:
    """The few HTTP calls the hook makes, with retries inside one deadline."""

    def __init__(self, server: str, token: str, deadline: float) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.deadline = deadline
        self.started = time.monotonic()
        self.reached = False

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def _post(self, path: str, body: bytes, timeout: float) -> tuple[int, Any]:
        request = urllib.request.Request(  # noqa: S310 - the URL is the configured Gatehouse server
            self.server + path,
            data=body,
            method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        self.reached = True
        try:
            return status, json.loads(raw or b"{}")
        except ValueError:
            raise Unreachable(f"Gatehouse answered {status} with a body that is not JSON") from None

    def hook(self, body: bytes, *, wait: float, on_timeout: str | None, ask_locally: bool) -> tuple[int, Any]:
        """POST the hook input, retrying transient faults while the deadline allows."""
        query: dict[str, str] = {"wait": f"{max(wait, 0):.1f}"}
        if on_timeout:
            query["on_timeout"] = on_timeout
        if ask_locally:
            query["ask"] = "local"
        path = "/hooks/claude-code?" + urllib.parse.urlencode(query)
        delay = 0.1
        while True:
            try:
                status, answer = self._post(path, body, timeout=wait + 10)
                if status not in TRANSIENT_STATUS:
                    return status, answer
                problem = f"Gatehouse answered {status}"
            except (urllib.error.URLError, OSError) as exc:
                problem = f"cannot reach Gatehouse at {self.server}: {getattr(exc, 'reason', exc)}"
            # A server never reached gets a short grace; a known one, the whole deadline.
            budget = self.remaining() if self.reached else min(self.remaining(), CONNECT_RETRY - self.elapsed())
            if budget <= delay:
                raise Unreachable(problem)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def cancel(self, request_id: str, hook_body: bytes) -> None:
        """Withdraw a pending request ("answered locally"); best effort, about a second."""
        body = json.dumps({"reason": "answered locally"}).encode()
        path = f"/api/v1/permission-requests/{urllib.parse.quote(request_id)}/cancel"
        try:
            status, _ = self._post(path, body, timeout=1.0) if request_id else (404, None)
            if status in (404, 405):
                # A server without the REST cancel route: withdraw through the hook endpoint.
                self._post("/hooks/claude-code?withdraw=1", hook_body, timeout=1.0)
        except (Unreachable, urllib.error.URLError, OSError):
            pass


def local_answer(event: str, behavior: str, reason: str) -> dict[str, Any] | None:
    """The output for a decision made here, without the server; None prints nothing."""
    if behavior == "ask" or event not in DECIDING_EVENTS:
        return None
    if event == "PreToolUse":
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": behavior,
                "permissionDecisionReason": reason,
            }
        }
    decision: dict[str, Any] = {"behavior": behavior}
    if behavior == "deny":
        decision["message"] = reason
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}


def decide(args: argparse.Namespace, event: str, body: bytes) -> dict[str, Any] | None:
    """Ask Gatehouse until it decides or our deadline comes; return the hook output."""
    client = Gatehouse(args.server, read_token(), time.monotonic() + max(args.timeout, 1.0))
    # Remembered so a signal handler can withdraw the call, even before its id is known.
    _PENDING.update(client=client, body=body, id="")
    # The first call does not wait, so a pending request's id is known (and can be
    # withdrawn if Claude Code kills us) before any long wait starts.
    wait, final = 0.0, False
    while True:
        status, answer = client.hook(
            body, wait=wait, on_timeout=args.on_timeout if final else None, ask_locally=args.ask_locally
        )
        pending = answer.get("gatehouse") if isinstance(answer, dict) else None
        if status == 200 and isinstance(answer, dict):
            return answer or None
        if status != 202 or not isinstance(pending, dict) or pending.get("status") != "pending":
            message = answer.get("error", {}).get("message") if isinstance(answer, dict) else None
            raise Unreachable(f"Gatehouse answered {status}: {message or answer}")
        _PENDING["id"] = str(pending.get("id", ""))
        if final:
            # The server should have applied on_timeout; if it did not, do it here.
            return local_answer(event, args.on_timeout, "Nobody answered in Gatehouse before the hook's deadline.")
        remaining = client.remaining()
        wait = min(args.poll, max(remaining - 1.0, 0.0))
        final = remaining - 1.0 <= args.poll


_PENDING: dict[str, Any] = {}


def _on_signal(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


def _withdraw() -> None:
    client, request_id = _PENDING.get("client"), _PENDING.get("id", "")
    if isinstance(client, Gatehouse):
        client.cancel(request_id, _PENDING["body"])


def run(argv: list[str] | None = None, stdin: Any = None) -> int:
    """The whole command; returns the exit code. Prints at most one JSON line."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    args = parse_args(argv)
    event = ""
    try:
        raw = (stdin or sys.stdin.buffer).read()
        hook_input = json.loads(raw or b"null")
        if not isinstance(hook_input, dict):
            raise Unreachable("stdin is not Claude Code's hook input (a JSON object)")
        event = str(hook_input.get("hook_event_name", ""))
        if event not in DECIDING_EVENTS + RECORDING_EVENTS:
            return 0
        if event in RECORDING_EVENTS:
            args.timeout = min(args.timeout, 10.0)
        output = decide(args, event, raw)
        if event in RECORDING_EVENTS:
            return 0
    except Interrupted:
        _withdraw()
        return 1
    except Exception as exc:  # never a traceback into Claude Code's transcript
        reason = str(exc) if isinstance(exc, Unreachable) else f"unexpected {type(exc).__name__}: {exc}"
        print(f"gatehouse hook: {reason}; applying --on-unreachable {args.on_unreachable}", file=sys.stderr)
        output = local_answer(event, args.on_unreachable, f"Gatehouse unreachable ({reason}).")
    if output:
        sys.stdout.write(json.dumps(output) + "\n")
        sys.stdout.flush()
    return 0


def main() -> None:
    try:
        code = run()
    except Interrupted:
        _withdraw()
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
