"""Start the process's deadline sweeper on its first HTTP request (no ASGI lifespan needed)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from relay import sweeper


class SweeperStartMiddleware:
    """Async under Daphne (where the sweeper runs); a no-op pass-through under WSGI."""

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
        return self.get_response(request)

    async def _acall(self, request: Any) -> Any:
        sweeper.ensure_started()
        response: Awaitable[Any] = self.get_response(request)
        return await response
