"""Oversized bodies are refused at the door, before Django spools them to disk."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.live import LiveServer, live_server

LIMIT = 1024 * 1024


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    with django_db_blocker.unblock(), live_server() as srv:
        yield srv


def chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield b"a" * min(size, total - sent)
        sent += size


@pytest.mark.django_db(transaction=True)
class BodyLimitTests:
    def test_it_refuses_a_declared_length_over_the_limit(self, server: LiveServer, ci_bot: Any) -> None:
        response = httpx.post(
            f"{server.url}/api/v1/permission-requests",
            content=b"a" * (LIMIT + 1),
            headers={"Authorization": f"Bearer {ci_bot.token}", "Content-Type": "application/json"},
        )
        assert response.status_code == 413
        assert "larger than" in response.json()["error"]["message"]

    def test_it_refuses_a_chunked_body_once_it_passes_the_limit(self, server: LiveServer, ci_bot: Any) -> None:
        response = httpx.post(
            f"{server.url}/api/v1/permission-requests",
            content=chunks(3 * LIMIT),
            headers={"Authorization": f"Bearer {ci_bot.token}", "Content-Type": "application/json"},
        )
        assert response.status_code == 413

    def test_it_lets_a_normal_body_through(self, server: LiveServer, ci_bot: Any) -> None:
        response = httpx.post(
            f"{server.url}/api/v1/permission-requests",
            json={"tool_name": "TaskList", "tool_input": {}, "tool_use_id": "body-ok"},
            headers={"Authorization": f"Bearer {ci_bot.token}"},
        )
        assert response.status_code == 200
        assert response.json()["decision"]["behavior"] == "allow"
