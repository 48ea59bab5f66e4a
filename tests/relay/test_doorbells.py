"""A server's doorbells ring on its event loop: the call that rang one answers without waiting for Redis."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from approvals import events, services, teambus
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


class HandOverTests:
    """A request's thread rings through its server's loop: a doorbell someone waits on (an
    agent on its decision) is rung before the thread goes on with its own work, which
    would otherwise hold the interpreter while the loop waits to ring it."""

    def test_a_doorbell_handed_over_is_rung_before_the_thread_goes_on(self) -> None:
        order = asyncio.run(self._ring_from_a_request_thread(hand_over=True))
        assert order == ["rung", "went on"]

    def test_a_doorbell_not_handed_over_does_not_wait_for_the_loop(self) -> None:
        order = asyncio.run(self._ring_from_a_request_thread(hand_over=False))
        assert order == ["went on", "rung"]

    def test_a_decision_hands_its_doorbell_over_and_a_call_decided_at_submit_does_not(
        self, ci_bot: Any, alice: Any
    ) -> None:
        handed: list[tuple[str, bool]] = []
        sent = events.send

        def recording(groups: list[str], event: dict[str, Any], *, hand_over: bool = False) -> None:
            handed.append((event["type"], hand_over))
            sent(groups, event, hand_over=hand_over)

        team = ci_bot.agent.team
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=team)
        call = {"tool_name": "Bash", "session_id": "s1", "cwd": "/srv/app"}
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(events, "send", recording)
            services.request_submit(agent=ci_bot.agent, call={**call, "tool_input": {"command": "git status"}})
            ask = services.request_submit(agent=ci_bot.agent, call={**call, "tool_input": {"command": "make"}})
            services.request_decide(ask.request.pk, services.Answer(behavior="allow", surface="api", user=alice))
        assert handed == [("request.decided", False), ("request.created", False), ("request.decided", True)]

    @staticmethod
    async def _ring_from_a_request_thread(*, hand_over: bool) -> list[str]:
        order: list[str] = []
        group = events.agent_group(424242)
        heard = asyncio.Event()
        went_on = threading.Event()

        def deliver(where: str, event: dict[str, Any]) -> None:
            if where == group:
                order.append("rung")
                heard.set()

        def busy_until_the_thread_went_on() -> None:
            # The loop is busy until the thread has gone on, and its doorbell waits behind
            # this. Handed over, the thread waits for the doorbell instead: then the loop
            # gives up on the thread after a tenth of a second, within the thread's wait
            # (events.HAND_OVER_SECONDS), and rings.
            went_on.wait(0.1 if hand_over else 5)

        def request_thread() -> None:
            loop.call_soon_threadsafe(busy_until_the_thread_went_on)
            events.send([group], {"type": "request.decided", "request_id": "r-hand-over"}, hand_over=hand_over)
            order.append("went on")
            went_on.set()

        loop = asyncio.get_running_loop()
        subscription = teambus.subscribe(deliver, lambda error: None)
        await subscription.add(group)
        try:
            await sync_to_async(request_thread)()
            await asyncio.wait_for(heard.wait(), 5)
            await asyncio.wait_for(events.DOORBELLS.idle(), 5)
        finally:
            await subscription.close()
        return order
