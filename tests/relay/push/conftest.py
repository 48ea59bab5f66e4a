"""A fake push service on 127.0.0.1, allowed by GATEHOUSE_PUSH_SERVICES, and subscribed browsers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.webpush import FakePushService, fake_push_service


@pytest.fixture(scope="module")
def push_service() -> Iterator[FakePushService]:
    with fake_push_service() as fake:
        yield fake


@pytest.fixture
def push_settings(settings: Any, push_service: FakePushService) -> Any:
    settings.GATEHOUSE_PUSH_SERVICES = ["127.0.0.1"]
    return settings


@pytest.fixture
def announcer(push_settings: Any, transactional_db: None) -> Iterator[Any]:
    from relay.push import webpush

    announcer = webpush.get_announcer()
    yield announcer
    assert announcer.queue.wait_idle(15), "pushes still queued at the end of the test"


def subscribe(user: Any, service: FakePushService) -> tuple[dict[str, Any], int]:
    """A browser of `user` subscribes through the API, as the dashboard's script does."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(user)
    subscription = service.subscribe()
    response = client.post("/api/v1/push-subscriptions", subscription, format="json")
    assert response.status_code == 201, response.content
    return subscription, response.json()["id"]


def ask(agent: Any, command: str = "npm test", **extra: Any) -> Any:
    from approvals import services

    call = {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": "s1", "cwd": "/repo", **extra}
    result = services.request_submit(agent=agent, call=call)
    assert result.decision is None, f"expected an ask, the engine said {result.decision}"
    return result.request


def token_of(delivered: Any, action: str) -> str:
    return next(a["token"] for a in delivered.payload["actions"] if a["action"] == action)
