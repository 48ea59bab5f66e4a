"""A server's doorbells ring on its event loop: the call that rang one answers without waiting for Redis."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from approvals import events, services
from tests.live import live_server
from tests.relay.redis_server import PrivateRedis, private_redis
from tests.relay.wsclient import dashboard_connect, in_thread, of_type, receive_until, send, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

# A bound on a step that takes milliseconds; the server's Redis client waits 15 s for a
# frozen Redis, so an answer held by its doorbell arrives after this.
ANSWER_WITHIN = 8.0


@contextmanager
def frozen(redis_server: PrivateRedis) -> Iterator[None]:
    """Redis stopped mid-flight: its connections stay open and nothing it is sent is answered."""
    assert redis_server.process is not None
    os.kill(redis_server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(redis_server.process.pid, signal.SIGCONT)


class AnswerBeforeDoorbellTests:
    def test_an_auto_decided_call_is_answered_while_redis_holds_its_doorbell(self, alice: Any, ci_bot: Any) -> None:
        team = ci_bot.agent.team
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=team)
        call = {"tool_name": "Bash", "tool_input": {"command": "git status"}, "session_id": "s1", "cwd": "/srv/app"}
        auth = {"Authorization": f"Bearer {ci_bot.token}"}
        cookie = session_cookie(alice)
        with private_redis() as redis_server, live_server(REDIS_URL=redis_server.url) as srv:

            def submit_while_frozen() -> httpx.Response:
                with frozen(redis_server):
                    return httpx.post(
                        f"{srv.url}/api/v1/permission-requests", json=call, headers=auth, timeout=ANSWER_WITHIN
                    )

            async def scenario() -> tuple[httpx.Response, dict[str, Any]]:
                async with dashboard_connect(srv, cookie) as dashboard:
                    await send(dashboard, {"type": "subscribe"})
                    await receive_until(dashboard, of_type("snapshot"))
                    answer = await in_thread(submit_while_frozen)
                    # Redis is answering again: the doorbell it held reaches the dashboard.
                    card = await receive_until(dashboard, of_type("request.decided", id=answer.json()["id"]))
                    return answer, card

            answer, card = asyncio.run(scenario())
        assert answer.status_code == 200 and answer.json()["decision"]["behavior"] == "allow"
        assert card["behavior"] == "allow"


class RecordingLayer:
    """The channel layer's `group_send`, holding each event of a type until that type is let through."""

    def __init__(self, held: str) -> None:
        self.held = held
        self.release = asyncio.Event()
        self.sent: asyncio.Queue[tuple[str, str | None]] = asyncio.Queue()

    async def group_send(self, group: str, event: dict[str, Any]) -> None:
        if event["type"] == self.held:
            await self.release.wait()
        self.sent.put_nowait((event["type"], event.get("request_id")))


class OrderTests:
    def test_one_requests_doorbells_keep_their_order_while_others_go_ahead(self) -> None:
        async def scenario() -> None:
            layer = RecordingLayer(held="request.created")
            doorbells = events.Doorbells()
            doorbells.ring(layer, ["user.1"], {"type": "request.created", "request_id": "a"})
            doorbells.ring(layer, ["user.1"], {"type": "request.decided", "request_id": "a"})
            doorbells.ring(layer, ["user.1"], {"type": "request.decided", "request_id": "b"})
            # b's doorbell does not wait for a's; a's decision waits for a's creation.
            assert await asyncio.wait_for(layer.sent.get(), 5) == ("request.decided", "b")
            assert layer.sent.empty()
            layer.release.set()
            first = await asyncio.wait_for(layer.sent.get(), 5)
            second = await asyncio.wait_for(layer.sent.get(), 5)
            assert [first, second] == [("request.created", "a"), ("request.decided", "a")]
            await asyncio.wait_for(doorbells.idle(), 5)
            assert doorbells.in_flight() == 0

        asyncio.run(scenario())

    def test_a_doorbell_that_fails_is_logged_and_the_next_one_still_rings(self, caplog: Any) -> None:
        class BrokenOnce(RecordingLayer):
            async def group_send(self, group: str, event: dict[str, Any]) -> None:
                if event["type"] == "request.created":
                    raise ConnectionError("Redis went away")
                await super().group_send(group, event)

        async def scenario() -> None:
            layer = BrokenOnce(held="")
            doorbells = events.Doorbells()
            doorbells.ring(layer, ["user.1"], {"type": "request.created", "request_id": "a"})
            doorbells.ring(layer, ["user.1"], {"type": "request.decided", "request_id": "a"})
            assert await asyncio.wait_for(layer.sent.get(), 5) == ("request.decided", "a")
            await asyncio.wait_for(doorbells.idle(), 5)

        asyncio.run(scenario())
        assert "event request.created to user.1 was not delivered" in caplog.text
