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

Nothing else changes: each request still has its own worker thread (Django's
`ThreadSensitiveContext`), so a request that waits holds only its own.
"""

from __future__ import annotations

from typing import Any

import django
from django.core.handlers.asgi import ASGIHandler


class SyncChainASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)
        self._middleware_chain: Any = self.adapt_method_mode(True, self._middleware_chain, False)


def get_asgi_application() -> SyncChainASGIHandler:
    django.setup(set_prefix=False)
    return SyncChainASGIHandler()
