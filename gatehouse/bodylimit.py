"""Refuse oversized HTTP bodies before Django reads them.

Under ASGI Django spools the whole body to a temporary file before any view or
`DATA_UPLOAD_MAX_MEMORY_SIZE` check runs, so a client could make the server write
gigabytes to disk. This middleware answers 413 as soon as the declared length, or the
bytes actually received, pass the limit.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
ASGIReceiveCallable = Callable[[], Awaitable[dict[str, Any]]]
ASGISendCallable = Callable[[dict[str, Any]], Awaitable[None]]


class BodySizeLimit:
    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._declared_length(scope) > self.limit:
            await self._refuse(send)
            return
        received = 0
        refused = False

        async def counting_receive() -> Any:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    refused = True
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, counting_receive, send)
        except BodyTooLarge:
            if refused:
                await self._refuse(send)

    @staticmethod
    def _declared_length(scope: Scope) -> int:
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return 0
        return 0

    async def _refuse(self, send: ASGISendCallable) -> None:
        body = too_large(self.limit)
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


def too_large(limit: int) -> bytes:
    """The 413's body, in the API's error shape (here, and in `gatehouse.serve` before the body is read)."""
    return json.dumps(
        {"error": {"code": "payload_too_large", "message": f"The body is larger than {limit} bytes."}}
    ).encode()


class BodyTooLarge(Exception):
    pass
