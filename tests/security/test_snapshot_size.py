"""One huge card must not break the dashboard snapshot for the whole team."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from approvals import services
from tests.live import LiveServer
from tests.relay.wsclient import ask_call, dashboard_connect, receive, send, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


class SnapshotCardLimitTests:
    @pytest.mark.parametrize("command_kb", [70, 280, 900])
    def test_it_sends_the_snapshot_within_a_1_mib_frame_with_a_stand_in_for_a_huge_card(
        self, security_server: LiveServer, ci_bot: Any, alice: Any, command_kb: int
    ) -> None:
        huge = services.request_submit(
            agent=ci_bot.agent,
            call={**ask_call("echo " + "x" * command_kb * 1024), "tool_use_id": f"huge-{command_kb}"},
        ).request
        small = [
            services.request_submit(
                agent=ci_bot.agent, call={**ask_call(f"rm -rf b{n}"), "tool_use_id": f"s{command_kb}-{n}"}
            )
            for n in range(3)
        ]
        cookie = session_cookie(alice)

        async def scenario() -> dict[str, Any]:
            # The client's default 1 MiB frame limit, as the reviewers' client had.
            async with dashboard_connect(security_server, cookie) as ws:
                await send(ws, {"type": "subscribe"})
                return await receive(ws)

        frame = asyncio.run(scenario())
        cards = {item["id"]: item["html"] for item in frame["requests"]}
        assert f"/requests/{huge.pk}/" in cards[str(huge.pk)]
        assert "too large to show" in cards[str(huge.pk)]
        assert len(cards[str(huge.pk)]) < 1024
        for result in small:
            assert "too large" not in cards[str(result.request.pk)]
            assert "rm -rf b" in cards[str(result.request.pk)]
