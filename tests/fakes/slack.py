"""A fake Slack Web API on 127.0.0.1, and signed interaction requests as Slack sends them.

`POST {url}/api/chat.postMessage|chat.update|chat.postEphemeral|views.open|auth.test` with a
bearer token, JSON or form bodies, answering `{"ok": true, ...}`; a 429 carries `Retry-After`.
`signed_interaction()` builds the `payload=<urlencoded JSON>` body and the
`X-Slack-Signature` (v0 HMAC-SHA256) headers Slack's interactivity requests carry;
`block_actions()` and `view_submission()` build the payloads of a button press and of a
submitted modal.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode


@dataclass
class Posted:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    updates: list[list[dict[str, Any]]] = field(default_factory=list)

    @property
    def buttons(self) -> list[dict[str, Any]]:
        return [e for b in self.blocks if b.get("type") == "actions" for e in b.get("elements", [])]

    def button(self, label: str) -> dict[str, Any]:
        return next(b for b in self.buttons if b["text"]["text"] == label)

    @property
    def all_text(self) -> str:
        parts = []
        for block in self.blocks:
            if "text" in block:
                parts.append(block["text"].get("text", ""))
            for element in block.get("elements", []):
                if isinstance(element.get("text"), str):
                    parts.append(element["text"])
        return "\n".join(parts)


class FakeSlack:
    def __init__(self, token: str = "xoxb-test-token") -> None:  # noqa: S107
        self.token = token
        self.cond = threading.Condition()
        self.messages: dict[tuple[str, str], Posted] = {}
        self.ephemerals: list[dict[str, Any]] = []
        self.views: list[dict[str, Any]] = []  # views.open calls: trigger_id, view, and the id we gave it
        self.fail_next: dict[str, list[int]] = {}
        self._ts = 1_700_000_000.0
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"fake Slack: condition not met within {timeout}s")
                self.cond.wait(min(remaining, 0.2))

    def cards(self) -> list[Posted]:
        with self.cond:
            return [m for m in self.messages.values() if m.buttons]

    def handle(self, method: str, token: str, params: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        if token != self.token:
            return 200, {"ok": False, "error": "invalid_auth"}, {}
        with self.cond:
            forced = self.fail_next.get(method)
            if forced:
                status = forced.pop(0)
                return status, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}
        if method == "auth.test":
            return 200, {"ok": True, "user_id": "UBOT", "team_id": "T1"}, {}
        if method == "chat.postMessage":
            return self._post(params)
        if method == "chat.update":
            return self._update(params)
        if method == "views.open":
            if not params.get("trigger_id") or not isinstance(params.get("view"), dict):
                return 200, {"ok": False, "error": "invalid_arguments"}, {}
            with self.cond:
                opened = {**params, "id": f"V{len(self.views) + 1:08d}"}
                self.views.append(opened)
                self.cond.notify_all()
            return 200, {"ok": True, "view": {**params["view"], "id": opened["id"]}}, {}
        if method == "chat.postEphemeral":
            with self.cond:
                self.ephemerals.append(params)
                self.cond.notify_all()
            return 200, {"ok": True, "message_ts": self._next_ts()}, {}
        return 200, {"ok": False, "error": "unknown_method"}, {}

    def _post(self, params: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        if not params.get("channel"):
            return 200, {"ok": False, "error": "channel_not_found"}, {}
        with self.cond:
            text = str(params.get("text", ""))
            posted = Posted(str(params["channel"]), self._next_ts(), text, params.get("blocks") or [])
            self.messages[(posted.channel, posted.ts)] = posted
            self.cond.notify_all()
        return 200, {"ok": True, "channel": posted.channel, "ts": posted.ts, "message": {"text": posted.text}}, {}

    def _update(self, params: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self.cond:
            posted = self.messages.get((str(params.get("channel")), str(params.get("ts"))))
            if posted is None:
                return 200, {"ok": False, "error": "message_not_found"}, {}
            posted.blocks = params.get("blocks") or []
            posted.text = str(params.get("text", ""))
            posted.updates.append(posted.blocks)
            self.cond.notify_all()
        return 200, {"ok": True, "channel": posted.channel, "ts": posted.ts}, {}

    def _next_ts(self) -> str:
        self._ts += 0.0001
        return f"{self._ts:.6f}"

    def start(self) -> FakeSlack:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if "application/json" in self.headers.get("Content-Type", ""):
                    params = json.loads(body or b"{}")
                else:
                    params = {k: _maybe_json(v) for k, v in parse_qsl(body.decode())}
                token = self.headers.get("Authorization", "").removeprefix("Bearer ") or str(params.get("token", ""))
                method = self.path.split("?")[0].removeprefix("/api/")
                status, payload, headers = fake.handle(method, token, params)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="fake-slack", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@contextmanager
def fake_slack(**kwargs: Any) -> Iterator[FakeSlack]:
    fake = FakeSlack(**kwargs).start()
    try:
        yield fake
    finally:
        fake.stop()


def _maybe_json(value: str) -> Any:
    if value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def block_actions(
    posted: Posted, label: str, *, user_id: str, username: str = "", trigger_id: str = ""
) -> dict[str, Any]:
    """The `block_actions` payload Slack sends when a user clicks a button on a message."""
    button = posted.button(label)
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": username or user_id.lower(), "team_id": "T1"},
        "api_app_id": "A1",
        "token": "verification-token-unused",
        "container": {"type": "message", "message_ts": posted.ts, "channel_id": posted.channel},
        "trigger_id": trigger_id or f"{int(time.time() * 1000)}.{user_id}.{button['action_id']}",
        "team": {"id": "T1", "domain": "acme"},
        "channel": {"id": posted.channel, "name": "approvals"},
        "message": {"ts": posted.ts, "text": posted.text},
        "response_url": "http://127.0.0.1:9/unused",
        "actions": [
            {
                "action_id": button["action_id"],
                "block_id": "b",
                "text": button["text"],
                "value": button["value"],
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def view_submission(opened: dict[str, Any], *, user_id: str, reason: str, username: str = "") -> dict[str, Any]:
    """The `view_submission` payload Slack sends when a user submits a modal opened by views.open."""
    view = opened["view"]
    values = {
        block["block_id"]: {block["element"]["action_id"]: {"type": block["element"]["type"], "value": reason}}
        for block in view.get("blocks", [])
        if block.get("type") == "input"
    }
    return {
        "type": "view_submission",
        "team": {"id": "T1", "domain": "acme"},
        "user": {"id": user_id, "username": username or user_id.lower(), "team_id": "T1"},
        "api_app_id": "A1",
        "token": "verification-token-unused",
        "trigger_id": f"{int(time.time() * 1000)}.{user_id}.submit",
        "view": {**view, "id": opened["id"], "hash": f"{opened['id']}.hash", "state": {"values": values}},
    }


def signed_interaction(
    secret: str, payload: dict[str, Any], *, timestamp: int | None = None
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of Slack's interactivity POST, signed as Slack signs it."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
    }
    return body, headers
