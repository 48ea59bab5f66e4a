"""A fake Telegram Bot API on 127.0.0.1 that speaks the real wire format.

`{url}/bot{token}/{method}` with JSON or form bodies, answering `{"ok": true, "result": ...}`
or `{"ok": false, "error_code": ..., "description": ..., "parameters": {"retry_after": N}}`.
It enforces a minimum interval between messages per chat (a 429 otherwise, like the real
flood control), holds updates until a `getUpdates` offset confirms them, and lets a test
play a person: `press()` a button, `reply()` to a message.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

BOT_ID = 999000


@dataclass
class Sent:
    chat_id: str
    message_id: int
    text: str
    reply_markup: dict[str, Any] | None
    edits: list[str] = field(default_factory=list)

    @property
    def buttons(self) -> list[dict[str, Any]]:
        rows = (self.reply_markup or {}).get("inline_keyboard") or []
        return [button for row in rows for button in row]

    def button(self, label: str) -> dict[str, Any]:
        return next(b for b in self.buttons if b["text"] == label)


class FakeTelegram:
    def __init__(self, token: str, *, chat_interval: float = 0.0) -> None:
        self.token = token
        self.chat_interval = chat_interval  # flood control: min seconds between messages per chat
        self.cond = threading.Condition()
        self.messages: dict[tuple[str, int], Sent] = {}
        self.toasts: list[dict[str, Any]] = []
        self.calls: list[str] = []
        self.rate_limited = 0  # 429s we answered
        self.updates: list[dict[str, Any]] = []
        self.confirmed_below = 0
        self.fail_next: dict[str, list[int]] = {}  # method -> queue of HTTP statuses to answer with
        self._next_message_id = 1
        self._next_update_id = 500_000
        self._last_sent: dict[str, float] = {}
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    # --- the person in the chat -------------------------------------------------------------

    def press(self, sent: Sent, label: str, *, user_id: int, username: str = "") -> int:
        """A user taps a button on a message; returns the update_id."""
        data = sent.button(label)["callback_data"]
        return self.press_raw(sent, data, user_id=user_id, username=username)

    def press_raw(self, sent: Sent, data: str, *, user_id: int, username: str = "") -> int:
        return self._add_update(
            lambda uid: {
                "callback_query": {
                    "id": f"cq{uid}",
                    "from": _user(user_id, username),
                    "chat_instance": "ci1",
                    "data": data,
                    "message": self._message_json(sent),
                }
            }
        )

    def reply(self, to: Sent, text: str, *, user_id: int, username: str = "") -> int:
        def build(uid: int) -> dict[str, Any]:
            return {
                "message": {
                    "message_id": self._new_message_id(),
                    "date": int(time.time()),
                    "chat": _chat(to.chat_id),
                    "from": _user(user_id, username),
                    "text": text,
                    "reply_to_message": self._message_json(to),
                }
            }

        return self._add_update(build)

    def say(self, text: str, *, user_id: int, username: str = "", chat_id: str | None = None) -> int:
        """A user writes to the bot: in their private chat (chat id = user id) unless `chat_id`."""

        def build(uid: int) -> dict[str, Any]:
            return {
                "message": {
                    "message_id": self._new_message_id(),
                    "date": int(time.time()),
                    "chat": _chat(chat_id or str(user_id)),
                    "from": _user(user_id, username),
                    "text": text,
                }
            }

        return self._add_update(build)

    def add_raw(self, update: dict[str, Any]) -> int:
        """Any update body Telegram could send (without `update_id`, which is added)."""
        return self._add_update(lambda uid: dict(update))

    def _add_update(self, build: Callable[[int], dict[str, Any]]) -> int:
        with self.cond:
            update_id = self._next_update_id
            self._next_update_id += 1
            self.updates.append({"update_id": update_id, **build(update_id)})
            self.cond.notify_all()
            return update_id

    # --- what a test waits for -------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"fake Telegram: condition not met within {timeout}s")
                self.cond.wait(min(remaining, 0.2))

    def cards(self) -> list[Sent]:
        with self.cond:
            return [m for m in self.messages.values() if m.buttons]

    def sent_to(self, chat_id: str | int) -> list[Sent]:
        with self.cond:
            return [m for (chat, _), m in sorted(self.messages.items()) if chat == str(chat_id)]

    def card_for(self, text_part: str) -> Sent | None:
        with self.cond:
            return next((m for m in self.messages.values() if text_part in m.text and m.buttons), None)

    def toast_for(self, callback_id: str) -> list[str]:
        with self.cond:
            return [t.get("text", "") for t in self.toasts if t["callback_query_id"] == callback_id]

    # --- the HTTP side ---------------------------------------------------------------------------

    def handle(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.cond:
            self.calls.append(method)
            forced = self.fail_next.get(method)
            if forced:
                status = forced.pop(0)
                if status == 429:
                    self.rate_limited += 1
                    return 429, _error(429, "Too Many Requests: retry after 1", retry_after=1)
                return status, _error(status, "Internal Server Error")
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return 404, _error(404, "Not Found: method not found")
        return handler(params)

    def _api_getMe(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        me = {"id": BOT_ID, "is_bot": True, "first_name": "Gatehouse", "username": "gh_bot"}
        return 200, {"ok": True, "result": me}

    def _api_sendMessage(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        chat_id = str(params["chat_id"])
        with self.cond:
            now = time.monotonic()
            last = self._last_sent.get(chat_id)
            if last is not None and now - last < self.chat_interval:
                self.rate_limited += 1
                return 429, _error(429, "Too Many Requests: retry after 1", retry_after=1)
            self._last_sent[chat_id] = now
            sent = Sent(chat_id, self._new_message_id(), str(params["text"]), params.get("reply_markup"))
            self.messages[(chat_id, sent.message_id)] = sent
            self.cond.notify_all()
            return 200, {"ok": True, "result": self._message_json(sent)}

    def _api_editMessageText(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        key = (str(params["chat_id"]), int(params["message_id"]))
        with self.cond:
            sent = self.messages.get(key)
            if sent is None:
                return 400, _error(400, "Bad Request: message to edit not found")
            if sent.text == params["text"] and sent.reply_markup == params.get("reply_markup"):
                return 400, _error(400, "Bad Request: message is not modified")
            sent.edits.append(str(params["text"]))
            sent.text = str(params["text"])
            sent.reply_markup = params.get("reply_markup")
            self.cond.notify_all()
            return 200, {"ok": True, "result": self._message_json(sent)}

    def _api_answerCallbackQuery(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.cond:
            self.toasts.append(params)
            self.cond.notify_all()
        return 200, {"ok": True, "result": True}

    def _api_getUpdates(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        limit = int(params.get("limit") or 100)
        deadline = time.monotonic() + timeout
        with self.cond:
            if offset:
                self.confirmed_below = max(self.confirmed_below, offset)
            while True:
                pending = [u for u in self.updates if u["update_id"] >= self.confirmed_below]
                if pending or time.monotonic() >= deadline:
                    return 200, {"ok": True, "result": pending[:limit]}
                self.cond.wait(min(0.2, max(0.0, deadline - time.monotonic())))

    def _api_deleteWebhook(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, {"ok": True, "result": True}

    def _new_message_id(self) -> int:
        self._next_message_id += 1
        return self._next_message_id

    def _message_json(self, sent: Sent) -> dict[str, Any]:
        message: dict[str, Any] = {
            "message_id": sent.message_id,
            "date": int(time.time()),
            "chat": _chat(sent.chat_id),
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Gatehouse", "username": "gh_bot"},
            "text": sent.text,
        }
        if sent.reply_markup and "inline_keyboard" in sent.reply_markup:  # the only kind a Message carries
            message["reply_markup"] = sent.reply_markup
        return message

    # --- server lifecycle -----------------------------------------------------------------------

    def start(self) -> FakeTelegram:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self._serve()

            def do_GET(self) -> None:
                self._serve()

            def _serve(self) -> None:
                prefix = f"/bot{fake.token}/"
                if not self.path.startswith(prefix):
                    self._send(401, _error(401, "Unauthorized"))
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                self._send(*fake.handle(self.path[len(prefix) :].split("?")[0], _params(self.headers, body)))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="fake-telegram", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            with self.cond:
                self.cond.notify_all()


@contextmanager
def fake_telegram(token: str = "123456:TEST-token", **kwargs: Any) -> Iterator[FakeTelegram]:  # noqa: S107
    fake = FakeTelegram(token, **kwargs).start()
    try:
        yield fake
    finally:
        fake.stop()


def _params(headers: Any, body: bytes) -> dict[str, Any]:
    """Bot API parameters from a JSON, urlencoded or multipart body (values may be JSON)."""
    content_type = headers.get("Content-Type", "")
    if not body:
        return {}
    if "application/json" in content_type:
        return dict(json.loads(body))
    if "multipart/form-data" in content_type:
        from email.parser import BytesParser
        from email.policy import HTTP

        message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        parts = message.iter_parts()
        pairs = [(part.get_param("name", header="content-disposition"), part.get_content()) for part in parts]
    else:
        pairs = parse_qsl(body.decode())
    params: dict[str, Any] = {}
    for name, value in pairs:
        value = value.decode() if isinstance(value, bytes) else value
        try:
            params[str(name)] = json.loads(value) if value[:1] in "{[" else value
        except ValueError:
            params[str(name)] = value
    return params


def _error(code: int, description: str, *, retry_after: int | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if retry_after is not None:
        payload["parameters"] = {"retry_after": retry_after}
    return payload


def _user(user_id: int, username: str) -> dict[str, Any]:
    user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": username or f"user{user_id}"}
    if username:
        user["username"] = username
    return user


def _chat(chat_id: str) -> dict[str, Any]:
    numeric = int(chat_id)
    return {"id": numeric, "type": "group" if numeric < 0 else "private", "title": "approvals"}
