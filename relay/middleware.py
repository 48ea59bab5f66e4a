"""Start the process's deadline sweeper on its first HTTP request (no ASGI lifespan needed)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction, markcoroutinefunction
from django.core.handlers.asgi import ASGIRequest

from relay import sweeper


async def _start_on_server_loop() -> None:
    sweeper.ensure_started()


class SweeperStartMiddleware:
    """Make sure the sweeper task runs on the server's event loop (Daphne, uvicorn).

    Django runs this middleware sync or async depending on the middleware below it.
    Async: start the task directly. Sync under ASGI: we are in a worker thread of the
    server's loop, and `async_to_sync` hops back onto that loop to start it there. Under
    WSGI (or the test client) there is no server loop to keep a task alive: do nothing.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: Any) -> Any:
        if self.is_async:
            return self._acall(request)
        if isinstance(request, ASGIRequest) and not sweeper.is_running():
            async_to_sync(_start_on_server_loop)()
        return self.get_response(request)

    async def _acall(self, request: Any) -> Any:
        sweeper.ensure_started()
        response: Awaitable[Any] = self.get_response(request)
        return await response
