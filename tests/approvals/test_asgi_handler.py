"""`gatehouse.handler`: a request crosses from the event loop into its worker thread once,
and its thread is kept for a later request.

Counted through asgiref's own adapters on the ASGI application the server runs (Django's
handler made seven `sync_to_async` and one `async_to_sync` crossing for one sync view).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import asgiref.sync
import pytest
from django.core.asgi import get_asgi_application as djangos_handler
from django.core.signals import request_started

from gatehouse.handler import RequestThreads, get_asgi_application

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


def scope_for(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
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


async def get_async(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    """One GET through the ASGI application: its status and body."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    inbox.put_nowait({"type": "http.request", "body": b"", "more_body": False})
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope_for(path, headers), inbox.get, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return int(sent[0]["status"]), body


def get(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    return asyncio.run(get_async(app, path, headers))


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


@pytest.fixture
def request_threads() -> Iterator[list[threading.Thread]]:
    """The thread each request's `request_started` runs in (the request's own thread)."""
    seen: list[threading.Thread] = []

    def record(**kwargs: Any) -> None:
        seen.append(threading.current_thread())

    request_started.connect(record, dispatch_uid="test-request-threads")
    yield seen
    request_started.disconnect(dispatch_uid="test-request-threads")


def get_many(app: Any, paths: list[str]) -> list[int]:
    """Send every GET at once on one event loop; their statuses in order."""

    async def run() -> list[int]:
        return [status for status, _ in await asyncio.gather(*(get_async(app, path, []) for path in paths))]

    return asyncio.run(run())


def test_requests_at_once_have_a_thread_each_and_later_requests_reuse_them(
    request_threads: list[threading.Thread],
) -> None:
    app = get_asgi_application()
    statuses = get_many(app, ["/accounts/login/"] * 4)
    assert statuses == [200] * 4
    at_once = set(request_threads)
    assert len(at_once) == 4, request_threads  # four requests running together: four threads
    for _ in range(6):
        assert get_many(app, ["/accounts/login/"]) == [200]
    assert len(request_threads) == 10
    assert set(request_threads) == at_once  # no thread started for the six after them
    assert app.threads.idle == 4


def test_djangos_own_handler_starts_a_thread_per_request(request_threads: list[threading.Thread]) -> None:
    """What the kept threads save; it fails should Django start reusing threads itself."""
    app = djangos_handler()
    for _ in range(3):
        assert get_many(app, ["/accounts/login/"]) == [200]
    assert len(set(request_threads)) == 3


def test_idle_threads_beyond_the_limit_are_stopped() -> None:
    threads = RequestThreads(keep=2)
    taken = [threads.take() for _ in range(3)]
    assert len(set(taken)) == 3
    for executor in taken:
        executor.submit(lambda: None).result(timeout=10)
        threads.give_back(executor)
    assert threads.idle == 2
    stopped = taken[2]
    with pytest.raises(RuntimeError):  # shut down: it takes no more work
        stopped.submit(lambda: None)
    assert threads.take() in taken[:2]
