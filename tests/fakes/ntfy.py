"""A fake ntfy server on 127.0.0.1 that takes ntfy's publish JSON and checks it as ntfy does.

`POST /` with `{"topic", "title", "message", "tags", "priority", "click", "actions"}`
(https://docs.ntfy.sh/publish/#publish-as-json). Topics are 1 to 64 of `[-_A-Za-z0-9]`; at
most three actions, each `view`, `http` or `broadcast` with a `label`, and a `url` for
view and http; an http action's `method`, `headers` and `body` are strings. With a token
set, `Authorization: Bearer <token>` is required (401 otherwise). It answers the message
JSON ntfy answers (`id`, `time`, `event: "message"`, `topic`, ...).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOPIC = re.compile(r"^[-_A-Za-z0-9]{1,64}$")


@dataclass
class FakeNtfy:
    token: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    def on_topic(self, topic: str) -> list[dict[str, Any]]:
        with self.cond:
            return [m for m in self.messages if m["topic"] == topic]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not (value := predicate()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"fake ntfy: condition not met within {timeout}s")
                self.cond.wait(min(remaining, 0.2))
            return value

    def publish(self, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        if self.token and headers.get("authorization") != f"Bearer {self.token}":
            return self._refuse(401, "unauthorized")
        try:
            message = json.loads(body)
        except ValueError:
            return self._refuse(400, "invalid JSON")
        problem = _problem(message)
        if problem:
            return self._refuse(400, problem)
        answer = {"id": os.urandom(6).hex(), "time": int(time.time()), "event": "message", **message}
        with self.cond:
            self.messages.append(message)
            self.cond.notify_all()
        return 200, answer

    def _refuse(self, status: int, why: str) -> tuple[int, dict[str, Any]]:
        with self.cond:
            self.refused.append(why)
            self.cond.notify_all()
        return status, {"code": status * 100 + 1, "http": status, "error": why}

    def start(self) -> FakeNtfy:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path not in ("/", ""):
                    status, answer = 404, {"error": "publish JSON goes to the root"}
                else:
                    status, answer = fake.publish({k.lower(): v for k, v in self.headers.items()}, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _problem(message: Any) -> str:
    if not isinstance(message, dict) or not TOPIC.match(str(message.get("topic", ""))):
        return "topic missing or invalid"
    for key in ("title", "message", "click"):
        if key in message and not isinstance(message[key], str):
            return f"{key} must be a string"
    actions = message.get("actions", [])
    if not isinstance(actions, list) or len(actions) > 3:
        return "at most three actions"
    for action in actions:
        if action.get("action") not in ("view", "http", "broadcast") or not action.get("label"):
            return f"invalid action {action!r}"
        if action["action"] in ("view", "http") and not str(action.get("url", "")).startswith(("http://", "https://")):
            return "an action needs a URL"
        if action["action"] == "http":
            if not isinstance(action.get("method", "POST"), str) or not isinstance(action.get("body", ""), str):
                return "http action method and body are strings"
            headers = action.get("headers", {})
            if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
                return "http action headers are strings"
    return ""


@contextmanager
def fake_ntfy(token: str = "") -> Iterator[FakeNtfy]:
    fake = FakeNtfy(token=token).start()
    try:
        yield fake
    finally:
        fake.stop()
