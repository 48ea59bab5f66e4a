"""One huge card must not break the dashboard snapshot for the whole team."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals import services
from tests.live import LiveServer
from tests.relay.wsclient import (
    ask_call,
    dashboard_connect,
    in_thread,
    of_type,
    receive,
    receive_until,
    send,
    session_cookie,
)

pytestmark = pytest.mark.django_db(transaction=True)


class SnapshotCardLimitTests:
    @pytest.mark.parametrize("command_kb", [70, 280, 900])
    def test_it_sends_the_snapshot_within_a_1_mib_frame_with_a_stand_in_for_a_huge_card(
        self, security_server: LiveServer, ci_bot: Any, alice: Any, command_kb: int
    ) -> None:
        huge = services.request_submit(
            agent=ci_bot.agent,
            call={**ask_call("printf " + "x" * command_kb * 1024), "tool_use_id": f"huge-{command_kb}"},
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
        assert (frame["part"], frame["parts"]) == (1, 1)
        cards = {item["id"]: item["html"] for item in frame["requests"]}
        assert f"/requests/{huge.pk}/" in cards[str(huge.pk)]
        assert "too large to show" in cards[str(huge.pk)]
        assert len(cards[str(huge.pk)]) < 1024
        for result in small:
            assert "too large" not in cards[str(result.request.pk)]
            assert "rm -rf b" in cards[str(result.request.pk)]


def _submit(agent: Any, command: str, key: str) -> Any:
    return services.request_submit(agent=agent, call={**ask_call(command), "tool_use_id": key}).request


SNAPSHOT_PART_TIMEOUT = 60.0


async def _snapshot(ws: Any) -> list[dict[str, Any]]:
    """Every part of one snapshot, in order; each frame was read by a 1 MiB-limit client.

    450 cards take the server a few seconds to render; on a loaded 2-core machine more
    than the usual frame timeout, so each part gets a minute (a bound, not a pause).
    """
    frames = [await receive(ws, SNAPSHOT_PART_TIMEOUT)]
    while frames[-1]["part"] < frames[-1]["parts"]:
        frames.append(await receive(ws, SNAPSHOT_PART_TIMEOUT))
    assert [f["part"] for f in frames] == list(range(1, frames[0]["parts"] + 1))
    assert all(f["type"] == "snapshot" and f["parts"] == frames[0]["parts"] for f in frames)
    return frames


class PushedCardLimitTests:
    @pytest.mark.parametrize("command_kb", [70, 900])
    def test_a_huge_card_is_pushed_as_a_stand_in(
        self, security_server: LiveServer, ci_bot: Any, alice: Any, command_kb: int
    ) -> None:
        cookie = session_cookie(alice)

        async def scenario() -> dict[str, Any]:
            async with dashboard_connect(security_server, cookie) as ws:
                await send(ws, {"type": "subscribe"})
                await _snapshot(ws)
                await in_thread(_submit, ci_bot.agent, "printf " + "x" * command_kb * 1024, f"push-{command_kb}")
                return await receive_until(ws, of_type("request.created"))

        frame = asyncio.run(scenario())
        assert "too large to show" in frame["html"] and f"/requests/{frame['id']}/" in frame["html"]
        assert len(frame["html"]) < 1024


class UpdatedCardLimitTests:
    @pytest.mark.parametrize("command_kb", [70, 280, 900])
    def test_a_huge_card_re_rendered_by_a_vote_is_pushed_as_a_stand_in(
        self, security_server: LiveServer, ci_bot: Any, alice: Any, command_kb: int
    ) -> None:
        # Two approvals needed: alice's vote re-renders the pending card for every dashboard.
        services.team_settings_update(team=ci_bot.agent.team, approvals_required=2)
        cookie = session_cookie(alice)

        def vote(request: Any) -> Any:
            return services.request_decide(request.pk, services.Answer(behavior="allow", surface="web", user=alice))

        async def scenario() -> dict[str, Any]:
            async with dashboard_connect(security_server, cookie) as ws:
                await send(ws, {"type": "subscribe"})
                await _snapshot(ws)
                request = await in_thread(
                    _submit, ci_bot.agent, "printf " + "x" * command_kb * 1024, f"vote-{command_kb}"
                )
                await receive_until(ws, of_type("request.created"))
                result = await in_thread(vote, request)
                assert result.vote is not None and result.decision is None, result
                return await receive_until(ws, of_type("request.updated"))

        frame = asyncio.run(scenario())
        assert "too large to show" in frame["html"] and f"/requests/{frame['id']}/" in frame["html"]
        assert len(frame["html"]) < 1024


class SnapshotPartsTests:
    @pytest.mark.parametrize("pending", [0, 1, 450])
    def test_a_snapshot_of_many_cards_comes_in_parts_under_the_frame_limit(
        self, security_server: LiveServer, ci_bot: Any, alice: Any, pending: int
    ) -> None:
        from approvals.models import PermissionRequest

        # Ordinary cards of a few KB each: ~370 of them made one frame past 1 MiB. Three
        # agents, so none passes GATEHOUSE_MAX_PENDING_PER_AGENT.
        agents = [services.agent_create(name=f"many-{k}", team=ci_bot.agent.team)[0] for k in range(3)]
        for n in range(pending):
            _submit(agents[n % 3], f"rm -rf build-{n} && echo {'y' * 2000}", f"many-{pending}-{n}")
        cookie = session_cookie(alice)

        async def scenario() -> list[dict[str, Any]]:
            async with dashboard_connect(security_server, cookie) as ws:
                await send(ws, {"type": "subscribe"})
                return await _snapshot(ws)

        frames = asyncio.run(scenario())
        ids = [item["id"] for frame in frames for item in frame["requests"]]
        expected = {str(pk) for pk in PermissionRequest.objects.filter(state="pending").values_list("pk", flat=True)}
        assert len(ids) == len(set(ids)) == pending and set(ids) == expected
        assert (len(frames) > 1) is (pending == 450)

    def test_a_repeated_subscribe_does_not_render_the_snapshot_again(
        self, security_server: LiveServer, ci_bot: Any, alice: Any
    ) -> None:
        _submit(ci_bot.agent, "rm -rf build", "resub-1")
        cookie = session_cookie(alice)

        async def scenario() -> list[dict[str, Any]]:
            async with dashboard_connect(security_server, cookie) as ws:
                await send(ws, {"type": "subscribe"})
                await _snapshot(ws)
                for _ in range(20):
                    await send(ws, {"type": "subscribe"})
                answers = [await receive(ws) for _ in range(20)]
                await send(ws, {"type": "open", "id": "not-a-uuid"})  # the socket still serves
                answers.append(await receive(ws))
                return answers

        answers = asyncio.run(scenario())
        assert [a.get("code") for a in answers[:20]] == ["too_soon"] * 20
        assert answers[20]["type"] == "error" and answers[20]["code"] != "too_soon"


@settings(deadline=None, max_examples=60)
@given(
    st.lists(st.integers(min_value=0, max_value=70_000), max_size=40), st.integers(min_value=1_000, max_value=300_000)
)
def test_snapshot_parts_keep_every_card_once_in_order_and_under_the_limit(sizes: list[int], limit: int) -> None:
    from relay.consumers.dashboard import snapshot_parts

    items = [{"id": str(n), "html": "<" * size} for n, size in enumerate(sizes)]
    parts = snapshot_parts(items, limit)
    assert parts and [item for part in parts for item in part] == items
    for part in parts:
        weight = sum(len(json.dumps(item)) + 1 for item in part)
        assert weight <= limit or len(part) == 1  # only a single card over the limit stands alone
