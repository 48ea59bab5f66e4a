"""The long-poll's wait: the database has the last word when the doorbell never rings."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer
from django.test import override_settings

from approvals import services
from approvals.waiting import wait_for_decision

# A receive stuck in its cancel hangs the old wait for good: fail fast instead.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


class DeafLayer(InMemoryChannelLayer):
    """A channel layer that loses every group message (the decider died before its
    announcement went out) and whose `receive` ignores cancellation until a message
    arrives on its own channel, as a receive blocked inside a client library can."""

    stubborn: list[str] = []
    woken: list[str] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        return None

    async def receive(self, channel: str) -> dict[str, Any]:
        DeafLayer.stubborn.append(channel)
        while True:
            try:
                message = await super().receive(channel)
            except asyncio.CancelledError:
                continue
            DeafLayer.woken.append(channel)
            return message


DEAF = {"default": {"BACKEND": "tests.approvals.test_waiting.DeafLayer"}}


@pytest.fixture
def deaf_layer() -> Any:
    DeafLayer.stubborn, DeafLayer.woken = [], []
    with override_settings(CHANNEL_LAYERS=DEAF):
        yield DeafLayer


async def decide_soon(request_id: Any, delay: float) -> None:
    await asyncio.sleep(delay)  # the approver answers while the agent waits
    await database_sync_to_async(services.request_decide)(
        request_id, services.Answer(behavior="allow", surface="api", decided_by="alice")
    )


def test_a_decision_without_a_doorbell_reaches_the_waiter(pending: Any, deaf_layer: Any) -> None:
    request = pending()

    async def scenario() -> Any:
        waiter = asyncio.ensure_future(wait_for_decision(request.pk, 60))
        await decide_soon(request.pk, 0.2)
        # Bounded: a recheck reads the database every couple of seconds.
        return await asyncio.wait_for(waiter, 15)

    decision = asyncio.run(scenario())
    assert decision is not None
    assert (decision.behavior, decision.decided_by) == ("allow", "alice")
    assert deaf_layer.stubborn, "the waiter should have listened for a doorbell"


def test_a_receive_that_ignores_its_cancel_is_woken_and_ends(pending: Any, deaf_layer: Any) -> None:
    request = pending()

    async def scenario() -> list[asyncio.Task[Any]]:
        waiter = asyncio.ensure_future(wait_for_decision(request.pk, 60))
        await decide_soon(request.pk, 0.2)
        await asyncio.wait_for(waiter, 15)
        # The abandoned receive is woken on its own channel after a grace period.
        for _ in range(100):
            if deaf_layer.woken:
                break
            await asyncio.sleep(0.05)
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    leftovers = asyncio.run(scenario())
    assert deaf_layer.woken == deaf_layer.stubborn[:1]
    assert leftovers == []


def test_a_request_still_pending_at_the_deadline_gives_none(pending: Any, deaf_layer: Any) -> None:
    request = pending()
    assert asyncio.run(asyncio.wait_for(wait_for_decision(request.pk, 0.5), 15)) is None
