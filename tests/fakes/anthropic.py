"""A small, generic fake of the Anthropic Messages API on 127.0.0.1.

`POST /v1/messages` answers with whatever text the test's `reply(body)` returns, as one
JSON message or, when the request says `"stream": true`, as server-sent events in the
real order (`message_start`, `content_block_start`, `content_block_delta`,
`content_block_stop`, `message_delta`, `message_stop`). `status` makes it fail instead
(e.g. 500 or 529 overloaded) with the real error body. Every request is recorded with
its headers, so tests can check the key and what the model was shown.

    with fake_anthropic(lambda body: '{"decision": "allow"}') as api:
        client = anthropic.Anthropic(api_key="test", base_url=api.url)
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], str]


@dataclass
class FakeAnthropicApi:
    reply: Reply
    status: int = 200
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _message(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-haiku-4-5"),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": max(1, len(text) // 4)},
    }


def _events(body: dict[str, Any], text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    message = _message(body, "")
    message["content"] = []
    message["stop_reason"] = None
    yield "message_start", {"type": "message_start", "message": message}
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    yield (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
    )
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": max(1, len(text) // 4)},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _handler(state: FakeAnthropicApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            with state.lock:
                state.requests.append(body)
                state.headers.append({k.lower(): v for k, v in self.headers.items()})
            if self.path.startswith("/v1/messages/count_tokens"):
                self._json(200, {"input_tokens": 10})
                return
            if not self.path.startswith("/v1/messages"):
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})
                return
            if state.status != 200:
                kind = "overloaded_error" if state.status == 529 else "api_error"
                self._json(state.status, {"type": "error", "error": {"type": kind, "message": "fake failure"}})
                return
            text = state.reply(body)
            if not body.get("stream"):
                self._json(200, _message(body, text))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for name, event in _events(body, text):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()

    return Handler


@contextmanager
def fake_anthropic(reply: Reply, *, status: int = 200) -> Iterator[FakeAnthropicApi]:
    state = FakeAnthropicApi(reply=reply, status=status)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
