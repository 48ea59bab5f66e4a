"""`gatehouse.handler`: a request crosses from the event loop into its worker thread once.

Counted through asgiref's own adapters on the ASGI application the server runs (Django's
handler made seven `sync_to_async` and one `async_to_sync` crossing for one sync view).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from typing import Any

import asgiref.sync
import pytest
from django.core.asgi import get_asgi_application as djangos_handler

from gatehouse.handler import get_asgi_application

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def crossings(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts asgiref's adapters as they run (the library's, not ours: a measurement)."""
    counts: Counter[str] = Counter()
    into_thread, out_of_thread = asgiref.sync.SyncToAsync.__call__, asgiref.sync.AsyncToSync.__call__

    async def counted_into(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts[getattr(self.func, "__qualname__", "?")] += 1
        counts["sync_to_async"] += 1
        return await into_thread(self, *args, **kwargs)

    def counted_out(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["async_to_sync"] += 1
        return out_of_thread(self, *args, **kwargs)

    monkeypatch.setattr(asgiref.sync.SyncToAsync, "__call__", counted_into)
    monkeypatch.setattr(asgiref.sync.AsyncToSync, "__call__", counted_out)
    yield counts


def get(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    sent: list[dict[str, Any]] = []

    async def run() -> None:
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        inbox.put_nowait({"type": "http.request", "body": b"", "more_body": False})

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": [(b"host", b"localhost"), *headers],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 80),
        }
        await app(scope, inbox.get, send)

    asyncio.run(run())
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], body


def test_an_authenticated_call_crosses_into_its_thread_once(ci_bot: Any, crossings: Counter[str]) -> None:
    status, body = get(
        get_asgi_application(), "/api/v1/health", [(b"authorization", f"Bearer {ci_bot.token}".encode())]
    )
    assert status == 200, body
    # The request_started signal, the middleware chain with the view, the response's close.
    assert crossings["sync_to_async"] == 3, crossings
    assert crossings["async_to_sync"] == 0, crossings


def test_djangos_own_handler_crosses_more_for_the_same_call(ci_bot: Any, crossings: Counter[str]) -> None:
    """The comparison the handler exists for; it fails should Django change its own."""
    status, body = get(djangos_handler(), "/api/v1/health", [(b"authorization", f"Bearer {ci_bot.token}".encode())])
    assert status == 200, body
    assert crossings["sync_to_async"] + crossings["async_to_sync"] > 3, crossings
