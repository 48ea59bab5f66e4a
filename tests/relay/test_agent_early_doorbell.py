"""A decision rung before its submit is back on the agent's socket still reaches the agent,
from the doorbell, without a database read; other requests' doorbells are kept bounded."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import OrderedDict
from typing import Any

import pytest
from django.test import override_settings

from approvals import events, services
from relay import fanout
from relay.consumers.agent import MAX_EARLY_DOORBELLS, AgentConsumer
from tests.relay.wsclient import ask_call, in_thread

pytestmark = pytest.mark.django_db(transaction=True)
WAIT = 10.0


def socket() -> tuple[AgentConsumer, list[dict[str, Any]]]:
    """An agent socket's consumer, its frames captured where the server would write them."""
    consumer = AgentConsumer()
    consumer.refs, consumer.early, consumer.team_of = {}, OrderedDict(), {}
    sent: list[dict[str, Any]] = []

    async def base_send(message: dict[str, Any]) -> None:
        sent.append(json.loads(message["text"]))

    consumer.base_send = base_send
    return consumer, sent


class EarlyDoorbellTests:
    @override_settings(REDIS_URL="")
    def test_a_decision_rung_before_the_submit_registers_follows_its_pending_frame(
        self, ci_bot: Any, alice: Any
    ) -> None:
        request = services.request_submit(agent=ci_bot.agent, call=ask_call()).request

        async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            groups, inbox = fanout.LocalGroups(), fanout.Inbox()
            await groups.join(events.agent_group(ci_bot.agent.pk), inbox)
            answer = services.Answer(behavior="allow", surface="web", user=alice)
            await in_thread(services.request_decide, request.pk, answer)
            event = await asyncio.wait_for(inbox.get(), WAIT)
            await groups.leave(events.agent_group(ci_bot.agent.pk), inbox)
            # Marked, so the frame shows where its decision came from: the doorbell, not a read.
            event = {**event, "decision": {**event["decision"], "message": "from the doorbell"}}
            consumer, sent = socket()
            await consumer.request_finished(event)  # the submit is not back yet
            before = list(sent)
            await consumer.owed(request.pk, "ref-1")
            return before, sent

        before, sent = asyncio.run(scenario())
        assert before == []
        assert [frame["type"] for frame in sent] == ["pending", "decision"]
        decision = sent[1]
        assert decision["ref"] == "ref-1" and decision["id"] == str(request.pk)
        assert decision["decision"]["behavior"] == "allow" and decision["decision"]["message"] == "from the doorbell"

    def test_doorbells_for_requests_owed_by_nobody_here_are_bounded(self) -> None:
        async def scenario() -> tuple[int, list[dict[str, Any]]]:
            consumer, sent = socket()
            for _ in range(MAX_EARLY_DOORBELLS + 10):
                await consumer.request_finished({"type": "request.decided", "request_id": str(uuid.uuid4())})
            return len(consumer.early), sent

        kept, sent = asyncio.run(scenario())
        assert kept == MAX_EARLY_DOORBELLS and sent == []
