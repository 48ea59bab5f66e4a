"""A webhook's timeout bounds the whole answer, not each read: a slow drip is a failure.

A raw socket server answers in the shapes a slow or hostile receiver can take; each is
run with `on_error=deny` (the call is denied) and `on_error=ignore` (the hook is skipped),
and the caller must give up long before the drip ends, saying it timed out.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from relay.webhooks import pre_tool_use_outputs, webhook_create
from tests.relay.wsclient import ask_call

pytestmark = pytest.mark.django_db

ALLOW = b'{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(ALLOW)
WHOLE = HEAD + ALLOW
# The same answer with spaces before its last brace: all but the end arrives at once.
PADDED = ALLOW[:-1] + b" " * 40 + b"}"
PADDED_HEAD = HEAD.replace(b"%d" % len(ALLOW), b"%d" % len(PADDED))

# name -> (bytes sent before dripping, bytes dripped one per `DRIP` seconds)
SHAPES = {
    "drips_the_body": (HEAD, ALLOW),
    "drips_the_headers": (b"", WHOLE),
    "drips_after_the_status_line": (WHOLE[:17], WHOLE[17:]),
    "holds_the_end_of_the_body": (PADDED_HEAD + PADDED[: len(ALLOW) - 1], PADDED[len(ALLOW) - 1 :]),
}
DRIP = 0.05


@contextmanager
def dripping_server(before: bytes, drip: bytes) -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                conn.recv(65536)  # the request (small, one read is enough on loopback)
                try:
                    conn.sendall(before)
                    for index in range(len(drip)):
                        if stop.is_set():
                            return
                        time.sleep(DRIP)
                        conn.sendall(drip[index : index + 1])
                except OSError:
                    pass  # the client gave up: what we want

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(timeout=10)
        listener.close()


class WebhookTotalDeadlineTests:
    @pytest.mark.parametrize("shape", list(SHAPES))
    @pytest.mark.parametrize("timeout_ms", [200, 500])
    def test_it_denies_when_a_deny_on_error_webhook_drips_past_its_timeout(
        self, default_team: object, shape: str, timeout_ms: int
    ) -> None:
        before, drip = SHAPES[shape]
        assert len(drip) * DRIP > 3 * timeout_ms / 1000  # the drip outlasts the timeout by far
        with dripping_server(before, drip) as url:
            webhook_create(
                team=default_team,  # type: ignore[arg-type]
                name="slow",
                url=url,
                event="PreToolUse",
                secret="s" * 32,
                timeout_ms=timeout_ms,
                on_error="deny",
            )
            started = time.monotonic()
            outputs = pre_tool_use_outputs(ask_call(), default_team.pk)  # type: ignore[attr-defined]
            took = time.monotonic() - started
        # Gave up on the drip rather than waited it out (no bound in seconds: a loaded
        # machine stretches both alike); the reason names the timeout.
        assert took < len(drip) * DRIP, took
        assert [o["hookSpecificOutput"]["permissionDecision"] for o in outputs] == ["deny"]
        assert "within" in outputs[0]["hookSpecificOutput"]["permissionDecisionReason"]

    @pytest.mark.parametrize("shape", list(SHAPES))
    def test_it_skips_an_ignore_on_error_webhook_that_drips(self, default_team: object, shape: str) -> None:
        before, drip = SHAPES[shape]
        with dripping_server(before, drip) as url:
            webhook_create(
                team=default_team,  # type: ignore[arg-type]
                name="slow",
                url=url,
                event="PreToolUse",
                secret="s" * 32,
                timeout_ms=200,
                on_error="ignore",
            )
            outputs = pre_tool_use_outputs(ask_call(), default_team.pk)  # type: ignore[attr-defined]
        assert outputs == []

    def test_it_still_takes_an_answer_that_comes_in_time(self, default_team: object) -> None:
        with dripping_server(WHOLE, b"") as url:
            webhook_create(
                team=default_team,  # type: ignore[arg-type]
                name="quick",
                url=url,
                event="PreToolUse",
                secret="s" * 32,
                timeout_ms=2000,
                on_error="deny",
            )
            outputs = pre_tool_use_outputs(ask_call(), default_team.pk)  # type: ignore[attr-defined]
        assert [o["hookSpecificOutput"]["permissionDecision"] for o in outputs] == ["allow"]
