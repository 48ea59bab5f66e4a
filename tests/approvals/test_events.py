"""Who hears a decision: the doorbells a committed decision rings, group by group."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from approvals import events, services
from tests.teamlisten import team_listener

CALL = {"tool_name": "Bash", "session_id": "s1", "cwd": "/srv/app"}


async def _receive(channel: str) -> dict[str, Any]:
    layer = get_channel_layer()
    assert layer is not None
    return await asyncio.wait_for(layer.receive(channel), 10)


def _listen(*groups: str) -> list[str]:
    """One fresh channel per group, joined to it."""
    layer = get_channel_layer()
    assert layer is not None
    channels = []
    for group in groups:
        channel = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)(group, channel)
        channels.append(channel)
    return channels


# Transactional: the doorbells ring from on_commit.
@pytest.mark.django_db(transaction=True)
class DecisionDoorbellTests:
    def test_an_auto_decided_submit_rings_the_dashboards_only(self, ci_bot: Any, default_team: Any) -> None:
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=default_team)
        agent = events.agent_group(ci_bot.agent.pk)
        with team_listener(events.team_group(default_team.pk), agent) as bus:
            call = {**CALL, "tool_input": {"command": "git status"}}
            result = services.request_submit(agent=ci_bot.agent, call=call)
            group, rung = bus.next()
            # The submitter had its answer from the call; the agent's sockets get no doorbell.
            events.send([agent], {"type": "test.marker"})
            after = bus.next()
        assert result.decision is not None and result.decision.behavior == "allow"
        assert (group, rung["type"], rung["request_id"]) == (
            events.team_group(default_team.pk),
            "request.decided",
            str(result.request.pk),
        )
        assert after == (agent, {"type": "test.marker"})

    def test_a_decision_on_a_pending_request_rings_its_agent_and_waiters(
        self, ci_bot: Any, alice: Any, default_team: Any
    ) -> None:
        result = services.request_submit(agent=ci_bot.agent, call={**CALL, "tool_input": {"command": "make deploy"}})
        assert result.decision is None
        (waiter,) = _listen(events.request_group(result.request.pk))
        groups = [events.team_group(default_team.pk), events.agent_group(ci_bot.agent.pk)]
        with team_listener(*groups) as bus:
            services.request_decide(result.request.pk, services.Answer(behavior="allow", user=alice, surface="web"))
            on_bus = dict([bus.next(), bus.next()])
        assert set(on_bus) == set(groups)
        heard = [*on_bus.values(), async_to_sync(_receive)(waiter)]
        for rung in heard:
            assert (rung["type"], rung["request_id"]) == ("request.decided", str(result.request.pk))
