"""A fake Anthropic Messages API on 127.0.0.1 that plays one scripted tool call.

It speaks the real wire format Claude Code and the SDKs use: `POST /v1/messages` with
`"stream": true` answers as server-sent events (`message_start`, `content_block_start`,
`content_block_delta` with `input_json_delta` for a `tool_use`, `content_block_stop`,
`message_delta` with the `stop_reason`, `message_stop`); without `stream` it answers one
JSON message. `POST /v1/messages/count_tokens` answers a token count.

The script: the first main-loop request (one that offers the scripted tool) gets the
`tool_use`; once a request carries the `tool_result` for it, the turn ends with a short
text. `fake_anthropic_calls` plays a list of calls instead, one per request, each after
the previous one's `tool_result`, so one CLI process can run hundreds of calls. Side
requests (titles, summaries, quota checks) get a plain text answer. Every
request body is kept, and the `tool_result` the model was sent is captured, so a test can
assert exactly what the model saw.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

MODEL = "claude-sonnet-4-5-20250929"


@dataclass
class ScriptedToolUse:
    name: str
    input: dict[str, Any]
    id: str = field(default_factory=lambda: f"toolu_{uuid.uuid4().hex[:24]}")
    final_text: str = "Done."


@dataclass
class FakeAnthropic:
    """The server's state: the script, every request seen, the tool results sent back."""

    tool_use: ScriptedToolUse
    # A call the model makes first (Claude Code edits only a file read in the session).
    prelude: ScriptedToolUse | None = None
    # A script of its own: given the request body, the blocks to answer with, or None for
    # the default script (a subagent's calls, a tool the default would not offer).
    script: Callable[[dict[str, Any]], list[dict[str, Any]] | None] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    tool_result_seen: threading.Event = field(default_factory=threading.Event)

    def record(self, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.paths.append(path)
            self.requests.append(body)
            for result in _tool_results(body):
                if result.get("tool_use_id") == self.tool_use.id and result not in self.tool_results:
                    self.tool_results.append(result)
                    self.tool_result_seen.set()

    def tool_result_text(self) -> str:
        """The text of the first tool_result the model was sent for the scripted call."""
        if not self.tool_results:
            return ""
        return _content_text(self.tool_results[0].get("content"))

    def tool_result_is_error(self) -> bool:
        return bool(self.tool_results and self.tool_results[0].get("is_error"))

    def answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The content blocks to answer with."""
        if self.script is not None:
            scripted = self.script(body)
            if scripted is not None:
                return scripted
        offers_tool = any(t.get("name") == self.tool_use.name for t in body.get("tools") or [])
        if not offers_tool:
            return [{"type": "text", "text": "Gatehouse test"}]
        answered = {r.get("tool_use_id") for r in _tool_results(body)}
        if self.tool_use.id in answered:
            return [{"type": "text", "text": self.tool_use.final_text}]
        call = self.tool_use if self.prelude is None or self.prelude.id in answered else self.prelude
        return [{"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}]


@dataclass
class FakeAnthropicCalls:
    """A script of many calls: each main-loop request gets the first call not yet answered."""

    calls: list[ScriptedToolUse]
    final_text: str = "Done."
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)

    def answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        offered = {t.get("name") for t in body.get("tools") or []}
        if not offered:  # a side request: a title, a summary
            return [{"type": "text", "text": "Gatehouse test"}]
        answered = {r.get("tool_use_id") for r in _tool_results(body)}
        call = next((c for c in self.calls if c.id not in answered), None)
        if call is None or call.name not in offered:
            return [{"type": "text", "text": self.final_text}]
        return [{"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}]


def _tool_results(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for message in body.get("messages") or []:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                yield block


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _sse_events(blocks: list[dict[str, Any]], model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    message_id = f"msg_{uuid.uuid4().hex[:24]}"
    usage = {"input_tokens": 12, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        },
    )
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            text = json.dumps(block["input"])
            # Split the JSON the way the real API does: several partial_json pieces.
            pieces = [text[i : i + 16] for i in range(0, len(text), 16)] or [""]
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        else:
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
        for delta in deltas:
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 20},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _message(blocks: list[dict[str, Any]], model: str) -> dict[str, Any]:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 20},
    }


def _handler(state: FakeAnthropic | FakeAnthropicCalls) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            return

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", f"req_{uuid.uuid4().hex[:12]}")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            state.record(self.path, {})
            self._json(200, {"data": [], "has_more": False})

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad JSON"}})
                return
            path = self.path.split("?", 1)[0]
            state.record(path, body)
            if path.endswith("/messages/count_tokens"):
                self._json(200, {"input_tokens": 42})
            elif path.endswith("/messages"):
                self._messages(body)
            else:
                self._json(200, {})

        def _messages(self, body: dict[str, Any]) -> None:
            blocks = state.answer(body)
            model = str(body.get("model") or MODEL)
            if not body.get("stream"):
                self._json(200, _message(blocks, model))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.send_header("request-id", f"req_{uuid.uuid4().hex[:12]}")
            self.end_headers()
            for name, payload in _sse_events(blocks, model):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()
            self.close_connection = True

    return Handler


@contextmanager
def fake_anthropic(
    tool_use: ScriptedToolUse,
    prelude: ScriptedToolUse | None = None,
    script: Callable[[dict[str, Any]], list[dict[str, Any]] | None] | None = None,
) -> Iterator[FakeAnthropic]:
    """Serve the fake API on a free 127.0.0.1 port for the duration of the block."""
    with _serving(FakeAnthropic(tool_use=tool_use, prelude=prelude, script=script)) as state:
        yield state


@contextmanager
def fake_anthropic_calls(calls: list[ScriptedToolUse]) -> Iterator[FakeAnthropicCalls]:
    """Serve a fake API that plays ``calls`` one after another."""
    with _serving(FakeAnthropicCalls(calls=calls)) as state:
        yield state


_State = TypeVar("_State", FakeAnthropic, FakeAnthropicCalls)


@contextmanager
def _serving(state: _State) -> Iterator[_State]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="fake-anthropic", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
