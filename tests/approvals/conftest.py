"""Helpers for the API tests: a JSON client per persona, and requests to act on."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from tests.conftest import AgentPersona

ASK_CALL = {"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "session_id": "s1", "cwd": "/tmp/proj"}


class Api:
    """A Django test client that speaks JSON and carries one persona's credentials."""

    def __init__(self, headers: dict[str, str] | None = None, client: Client | None = None) -> None:
        self.client = client or Client()
        self.headers = headers or {}

    def call(self, method: str, path: str, body: Any = None, **extra: Any) -> Any:
        kwargs: dict[str, Any] = {**self.headers, **extra}
        if body is not None:
            kwargs["data"] = body if isinstance(body, str | bytes) else json.dumps(body)
            kwargs["content_type"] = "application/json"
        return getattr(self.client, method)(path, **kwargs)

    def get(self, path: str, **extra: Any) -> Any:
        return self.call("get", path, **extra)

    def post(self, path: str, body: Any = None, **extra: Any) -> Any:
        return self.call("post", path, {} if body is None else body, **extra)


def person_api(user: Any) -> Api:
    from approvals import services

    token = services.personal_token_create(user=user)
    return Api({"HTTP_AUTHORIZATION": f"Bearer {token}"})


@pytest.fixture
def api_as() -> Callable[[Any], Api]:
    """`api_as(alice)` or `api_as(ci_bot)`: a client authenticated as that persona."""

    def make(persona: Any) -> Api:
        if isinstance(persona, AgentPersona):
            return Api(persona.auth)
        return person_api(persona)

    return make


@pytest.fixture
def pending(ci_bot: AgentPersona) -> Callable[..., Any]:
    """`pending()` submits an ask for ci-bot and returns the pending PermissionRequest."""
    from approvals import services

    counter = iter(range(10_000))

    def make(**overrides: Any) -> Any:
        call = {**ASK_CALL, "tool_use_id": f"toolu_{next(counter)}", **overrides}
        result = services.request_submit(agent=ci_bot.agent, call=call)
        assert result.decision is None, "the engine should ask for this call"
        return result.request

    return make
