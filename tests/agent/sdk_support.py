"""Shared pieces of the SDK tests: one live Gatehouse per module, and an approver's hands.

The server is a real Daphne process on the test database (`tests/live.py`); the approver
answers through the real `/decision` endpoint with a personal token, as a phone app would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from tests.live import LiveServer, live_server


@pytest.fixture(scope="module")
def gatehouse(django_db_setup: None, django_db_blocker: Any) -> Iterator[LiveServer]:
    """One server for the module; each test still gets a clean (truncated) database."""
    with live_server() as server:
        yield server


class Approver:
    """A person deciding over HTTP: finds pending requests, answers them."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    async def pending(self, tool_use_id: str, timeout: float = 20.0) -> dict[str, Any]:
        """Wait (polling the list endpoint, with a deadline) until the request is pending."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            response = await self.http.get("/api/v1/permission-requests", params={"state": "pending"})
            assert response.status_code == 200, response.text
            body = response.json()
            rows = body.get("results", body) if isinstance(body, dict) else body
            for row in rows:
                if row["tool_use_id"] == tool_use_id:
                    return dict(row)
            await asyncio.sleep(0.05)
        raise AssertionError(f"request {tool_use_id} never became pending")

    async def decide(self, request_id: str, behavior: str, message: str = "", **extra: Any) -> httpx.Response:
        body = {"behavior": behavior, "message": message, **extra}
        return await self.http.post(f"/api/v1/permission-requests/{request_id}/decision", json=body)

    async def answer(self, tool_use_id: str, behavior: str, message: str = "") -> dict[str, Any]:
        row = await self.pending(tool_use_id)
        response = await self.decide(row["id"], behavior, message)
        assert response.status_code == 200, response.text
        return row

    async def aclose(self) -> None:
        await self.http.aclose()


@pytest.fixture
def approver_token(alice: Any) -> str:
    from approvals import services

    return services.personal_token_create(user=alice)


def in_db(func: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """Run an ORM read/write from an async test (the ORM refuses the event loop thread).

    The worker thread's connection is closed afterwards, so none is left open to block
    PostgreSQL from dropping the test database at the end of the run.
    """

    def closing(*args: Any, **kwargs: Any) -> Any:
        from django.db import connection

        try:
            return func(*args, **kwargs)
        finally:
            connection.close()

    return sync_to_async(closing, thread_sensitive=False)


def audit_rows(**filters: Any) -> list[Any]:
    from approvals.models import Decision

    return list(Decision.objects.filter(**filters).select_related("request"))


def requests_for(tool_use_id: str) -> list[Any]:
    from approvals.models import PermissionRequest

    return list(PermissionRequest.objects.filter(tool_use_id=tool_use_id))


def add_rule(rule: str, behavior: str, source: str = "projectSettings") -> None:
    from approvals import services

    services.rule_create(rule=rule, behavior=behavior, source=source, team=services.default_team())


async def stored_result(tool_use_id: str, timeout: float = 10.0) -> Any:
    """The result the server recorded for a call (tool_result frames are fire-and-forget)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = await in_db(requests_for)(tool_use_id)
        if rows and rows[0].result is not None:
            return rows[0].result
        await asyncio.sleep(0.05)
    return None
