"""Django's ASGI handler with the middleware chain built sync and crossed into once.

Under ASGI Django builds its middleware chain async. Every middleware here (ours and
Django's own) is sync, so that chain crossed between the event loop and the request's
worker thread at each boundary: into the thread for the middleware, back to the loop for
the view's lookup, into the thread again for CSRF's `process_view`, for a sync view and
for its `render()`, and back out each time. Counted on `GET /api/v1/health`: seven
`sync_to_async` crossings and one `async_to_sync`, each a thread wake-up and a loop turn.
Built sync (as under WSGI) and adapted to async once, the chain with its view is one
crossing, and a request makes three (Django's `request_started` signal, the chain, the
response's `close()`; `tests/approvals/test_asgi_handler.py`). An async view is reached
from the thread through `async_to_sync`, as the sync chain always reached it.

Each request still has a worker thread of its own for as long as it runs (Django's
`ThreadSensitiveContext`), so a request that waits holds only its own. Django starts that
thread for the request and joins it at the end: a thread start and a join per request,
about an eighth of the event loop's busy time under load. Here the thread is kept for the
next request instead (`RequestThreads`): a request takes an idle one, or starts one when
none is idle, and gives it back when it ends.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import django
from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler

# Idle request threads kept beyond this many are stopped: a burst of waiting requests
# does not leave its threads behind for the life of the process.
KEEP_IDLE_THREADS = 32


class RequestThreads:
    """Single-thread executors, one per running request, kept for the next request."""

    def __init__(self, keep: int = KEEP_IDLE_THREADS) -> None:
        self.keep = keep
        self._idle: list[ThreadPoolExecutor] = []

    def take(self) -> ThreadPoolExecutor:
        return self._idle.pop() if self._idle else ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        # The request's context has exited, so its thread has finished every call of the
        # request (asgiref waits for a sync call even when its task is cancelled).
        if len(self._idle) < self.keep:
            self._idle.append(executor)
        else:
            executor.shutdown(wait=False)

    @property
    def idle(self) -> int:
        return len(self._idle)


class SyncChainASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self.threads = RequestThreads()

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)
        self._middleware_chain: Any = self.adapt_method_mode(True, self._middleware_chain, False)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self.threads.take()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self.threads.give_back(executor)


def get_asgi_application() -> SyncChainASGIHandler:
    django.setup(set_prefix=False)
    return SyncChainASGIHandler()
