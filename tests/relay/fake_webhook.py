"""A webhook receiver on 127.0.0.1 that records signed calls and answers from a script."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# answer(body) -> (status, json answer or None for an empty body, delay in seconds)
Answer = Callable[[dict[str, Any]], tuple[int, dict[str, Any] | None, float]]


@dataclass
class FakeWebhook:
    answer: Answer
    url: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    called: threading.Event = field(default_factory=threading.Event)


@contextmanager
def fake_webhook(answer: Answer) -> Iterator[FakeWebhook]:
    state = FakeWebhook(answer)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw)
            with state.lock:
                state.calls.append({"raw": raw, "body": body, "headers": dict(self.headers.items())})
            state.called.set()
            status, payload, delay = state.answer(body)
            if delay:
                time.sleep(delay)  # a slow receiver, to exercise the per-hook timeout
            data = json.dumps(payload).encode() if payload is not None else b""
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the caller gave up (its timeout); that is the point of the delay

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
