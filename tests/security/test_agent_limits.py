"""What one agent can hold: asks waiting for a person, and open sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from approvals import services
from approvals.models import Decision, RequestState
from tests.live import LiveServer, live_server
from tests.relay.wsclient import agent_connect, ask_call, close_code, receive, send

pytestmark = pytest.mark.django_db(transaction=True)


class PendingLimitTests:
    @pytest.mark.parametrize("limit", [1, 3, 5])
    def test_it_denies_and_audits_an_ask_beyond_the_agents_pending_limit(
        self, settings: Any, ci_bot: Any, other_bot: Any, alice: Any, limit: int
    ) -> None:
        settings.GATEHOUSE_MAX_PENDING_PER_AGENT = limit
        waiting = [
            services.request_submit(agent=ci_bot.agent, call={**ask_call(), "tool_use_id": f"w{n}"})
            for n in range(limit)
        ]
        assert all(r.decision is None for r in waiting)
        over = services.request_submit(agent=ci_bot.agent, call={**ask_call(), "tool_use_id": "over"})
        assert over.request.state == RequestState.DECIDED
        assert over.decision is not None and over.decision.behavior == "deny"
        assert "GATEHOUSE_MAX_PENDING_PER_AGENT" in over.decision.message
        assert Decision.objects.get(request_id=over.request.pk).reason["detail"] == "pendingLimit"
        # Another agent is not held back by this one's queue.
        assert services.request_submit(agent=other_bot.agent, call={**ask_call(), "tool_use_id": "o"}).decision is None
        # An answer frees a place.
        services.request_decide(waiting[0].request.pk, services.Answer(behavior="deny", surface="web", user=alice))
        again = services.request_submit(agent=ci_bot.agent, call={**ask_call(), "tool_use_id": "again"})
        assert again.decision is None

    def test_it_does_not_touch_calls_the_engine_decides(self, settings: Any, ci_bot: Any, default_team: Any) -> None:
        settings.GATEHOUSE_MAX_PENDING_PER_AGENT = 1
        services.rule_create(rule="Bash(ls:*)", behavior="allow", source="policySettings", team=default_team)
        services.request_submit(agent=ci_bot.agent, call={**ask_call(), "tool_use_id": "w"})
        allowed = services.request_submit(agent=ci_bot.agent, call={**ask_call("ls -la"), "tool_use_id": "ls"})
        assert allowed.decision is not None and allowed.decision.behavior == "allow"


@pytest.fixture(scope="module")
def two_socket_server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    with django_db_blocker.unblock(), live_server(GATEHOUSE_MAX_AGENT_SOCKETS="2") as srv:
        yield srv


async def works(ws: Any) -> bool:
    try:
        await send(ws, {"type": "no-such-frame", "ref": "ping"})
        return (await receive(ws)).get("code") == "unknown_type"
    except ConnectionClosed:
        return False


async def opens_within(srv: LiveServer, token: str, timeout: float = 10.0) -> bool:
    """Whether a working socket opens within `timeout`: the server counts a closed socket
    out when its disconnect is handled, a moment after the client saw the close."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        async with agent_connect(srv, token) as ws:
            if await works(ws):
                return True
        await asyncio.sleep(0.05)
    return False


class AgentSocketLimitTests:
    def test_it_closes_an_agents_socket_beyond_the_limit_with_4429(
        self, two_socket_server: LiveServer, ci_bot: Any, other_bot: Any
    ) -> None:
        async def scenario() -> tuple[list[bool], dict[str, Any], int | None, bool, bool]:
            async with (
                agent_connect(two_socket_server, ci_bot.token) as first,
                agent_connect(two_socket_server, ci_bot.token) as second,
            ):
                opened = [await works(first), await works(second)]
                async with agent_connect(two_socket_server, ci_bot.token) as third:
                    refused = await receive(third)
                    code = await close_code(third)
                async with agent_connect(two_socket_server, other_bot.token) as others:
                    other_ok = await works(others)
            # Both closed: the agent may open sockets again.
            later_ok = await opens_within(two_socket_server, ci_bot.token)
            return opened, refused, code, other_ok, later_ok

        opened, refused, code, other_ok, later_ok = asyncio.run(scenario())
        assert opened == [True, True]
        assert refused["code"] == "too_many_sockets"
        assert code == 4429
        assert other_ok and later_ok

    @pytest.mark.parametrize("rounds", [3, 6])
    def test_it_frees_a_place_whenever_a_socket_closes(
        self, two_socket_server: LiveServer, ci_bot: Any, rounds: int
    ) -> None:
        async def scenario() -> list[bool]:
            return [await opens_within(two_socket_server, ci_bot.token) for _ in range(rounds * 2)]

        assert asyncio.run(scenario()) == [True] * rounds * 2
