"""Pushes rendered once per process and event: each socket still gets only what its user may see."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import redis

from approvals import selectors, services
from approvals.models import Decision, Membership
from relay import fanout, race
from relay.consumers.base import CLOSE_EVENTS_LOST
from relay.consumers.dashboard import card_frame
from tests.live import live_server
from tests.relay.redis_server import private_redis
from tests.relay.wsclient import (
    agent_connect,
    ask_call,
    close_code,
    dashboard_connect,
    in_thread,
    of_type,
    receive,
    receive_until,
    send,
    session_cookie,
)

pytestmark = pytest.mark.django_db(transaction=True)

DECIDE_FORM = '<form class="decide"'


async def subscribed(ws: Any) -> None:
    await send(ws, {"type": "subscribe"})
    await receive_until(ws, of_type("snapshot"))


async def next_frame_after_ping(ws: Any) -> dict[str, Any]:
    """The first frame after everything already queued for this socket: a ping's error answers last."""
    await send(ws, {"type": "ping"})
    return await receive(ws)


class SharedCardTests:
    def test_it_gives_the_decide_form_to_approvers_only(
        self, relay_server: Any, alice: Any, bob: Any, ci_bot: Any
    ) -> None:
        alice_cookie, bob_cookie = session_cookie(alice), session_cookie(bob)

        async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
            async with (
                dashboard_connect(relay_server, alice_cookie) as approver,
                dashboard_connect(relay_server, bob_cookie) as viewer,
                agent_connect(relay_server, ci_bot.token) as agent,
            ):
                for ws in (approver, viewer):
                    await subscribed(ws)
                await send(agent, {"type": "permission_request", "ref": "r", "request": ask_call()})
                pending = await receive_until(agent, of_type("pending"))
                return (
                    await receive_until(approver, of_type("request.created", id=pending["id"])),
                    await receive_until(viewer, of_type("request.created", id=pending["id"])),
                )

        for_alice, for_bob = asyncio.run(scenario())
        assert "build" in for_alice["html"] and "build" in for_bob["html"]
        assert DECIDE_FORM in for_alice["html"]
        assert DECIDE_FORM not in for_bob["html"] and "approvers decide" in for_bob["html"]

    def test_it_stops_pushing_to_someone_removed_from_the_team(
        self, relay_server: Any, alice: Any, bob: Any, ci_bot: Any
    ) -> None:
        alice_cookie, bob_cookie = session_cookie(alice), session_cookie(bob)

        async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
            async with (
                dashboard_connect(relay_server, alice_cookie) as stays,
                dashboard_connect(relay_server, bob_cookie) as removed,
            ):
                for ws in (stays, removed):
                    await subscribed(ws)
                # Bob's socket is still in the team's group; the memberships read with
                # the card must keep it from him.
                await in_thread(lambda: Membership.objects.filter(user=bob).delete())
                await in_thread(services.request_submit, agent=ci_bot.agent, call=ask_call())
                created = await receive_until(stays, of_type("request.created"))
                return created, await next_frame_after_ping(removed)

        created, bob_next = asyncio.run(scenario())
        assert "build" in created["html"]
        assert bob_next["type"] == "error" and bob_next["code"] == "unknown_type"

    def test_it_keeps_pushing_after_other_dashboards_of_the_process_close(
        self, relay_server: Any, alice: Any, ci_bot: Any
    ) -> None:
        cookie = session_cookie(alice)

        async def scenario() -> list[str]:
            seen = []
            async with dashboard_connect(relay_server, cookie) as pc:
                async with dashboard_connect(relay_server, cookie) as phone:
                    for ws in (pc, phone):
                        await subscribed(ws)
                first = await in_thread(
                    services.request_submit, agent=ci_bot.agent, call=ask_call("rm -rf one", tool_use_id="one")
                )
                seen.append((await receive_until(pc, of_type("request.created", id=str(first.request.pk))))["id"])
            # Every dashboard of the team has left: the next one subscribes afresh.
            async with dashboard_connect(relay_server, cookie) as tablet:
                await subscribed(tablet)
                second = await in_thread(
                    services.request_submit, agent=ci_bot.agent, call=ask_call("rm -rf two", tool_use_id="two")
                )
                seen.append((await receive_until(tablet, of_type("request.created", id=str(second.request.pk))))["id"])
            return seen

        assert len(asyncio.run(scenario())) == 2


class DecisionFrameTests:
    def test_it_sends_the_agent_the_decision_as_recorded(self, relay_server: Any, alice: Any, ci_bot: Any) -> None:
        async def scenario() -> dict[str, Any]:
            async with agent_connect(relay_server, ci_bot.token) as agent:
                await send(agent, {"type": "permission_request", "ref": "r", "request": ask_call()})
                pending = await receive_until(agent, of_type("pending"))
                await in_thread(
                    race.answer,
                    pending["id"],
                    services.Answer(behavior="deny", surface="web", user=alice, message="not on the release branch"),
                )
                return await receive_until(agent, of_type("decision", ref="r"))

        frame = asyncio.run(scenario())
        row = Decision.objects.select_related("request").get(request_id=frame["id"])
        assert frame["status"] == row.request.state == "decided"
        assert frame["decision"] == selectors.decision_payload(row)
        assert frame["decision"]["message"] == "not on the release branch"

    def test_it_reads_a_large_rewritten_input_from_the_database(
        self, relay_server: Any, alice: Any, ci_bot: Any
    ) -> None:
        # Too large to ride on the event through the channel layer: the socket reads the row.
        rewritten = {"command": "echo " + "x" * 40_000}

        async def scenario() -> dict[str, Any]:
            async with agent_connect(relay_server, ci_bot.token) as agent:
                await send(agent, {"type": "permission_request", "ref": "r", "request": ask_call()})
                pending = await receive_until(agent, of_type("pending"))
                await in_thread(
                    race.answer,
                    pending["id"],
                    services.Answer(behavior="allow", surface="web", user=alice, updated_input=rewritten),
                )
                return await receive_until(agent, of_type("decision", ref="r"))

        frame = asyncio.run(scenario())
        assert frame["decision"]["behavior"] == "allow"
        assert frame["decision"]["updated_input"] == rewritten


class LostSubscriptionTests:
    @pytest.mark.parametrize("fault", ["restart", "flush"])
    def test_dashboards_hear_again_after_redis_loses_its_keys(self, alice: Any, ci_bot: Any, fault: str) -> None:
        cookie = session_cookie(alice)
        with private_redis() as redis_server, live_server(REDIS_URL=redis_server.url) as srv:

            def lose_keys() -> None:
                if fault == "restart":
                    redis_server.restart()  # the process's Redis connections break too
                else:
                    redis.Redis.from_url(redis_server.url).flushall()  # they stay open

            async def scenario() -> dict[str, Any]:
                async with dashboard_connect(srv, cookie) as before:
                    await subscribed(before)
                    await in_thread(lose_keys)
                    # The group membership is gone with the keys. The old socket may be
                    # closed (4011) or kept; a page that (re)subscribes must hear again.
                    async with dashboard_connect(srv, cookie) as after, agent_connect(srv, ci_bot.token) as agent:
                        await subscribed(after)
                        # Submitted through the server, so announced on its Redis.
                        await send(agent, {"type": "permission_request", "ref": "r", "request": ask_call()})
                        pending = await receive_until(agent, of_type("pending"))
                        return await receive_until(after, of_type("request.created", id=pending["id"]))

            assert "build" in asyncio.run(scenario())["html"]

    def test_an_agent_socket_that_lost_its_doorbells_closes_and_hears_again_after_resuming(
        self, alice: Any, ci_bot: Any
    ) -> None:
        token = services.personal_token_create(user=alice)
        with private_redis() as redis_server, live_server(REDIS_URL=redis_server.url) as srv:

            async def scenario() -> tuple[int | None, dict[str, Any], dict[str, Any]]:
                async with agent_connect(srv, ci_bot.token) as agent:
                    await send(agent, {"type": "permission_request", "ref": "r", "request": ask_call()})
                    request_id = (await receive_until(agent, of_type("pending")))["id"]
                    await in_thread(redis_server.restart)
                    # Not kept open deaf: its decisions would wait for the slow re-check.
                    code = await close_code(agent)
                async with agent_connect(srv, ci_bot.token) as agent:
                    await send(agent, {"type": "resume", "ids": [{"id": request_id, "ref": "r"}]})
                    still = await receive_until(agent, of_type("pending"))
                    async with httpx.AsyncClient(base_url=srv.url, timeout=20) as api:
                        response = await api.post(
                            f"/api/v1/permission-requests/{request_id}/decision",
                            json={"behavior": "allow"},
                            headers={"Authorization": f"Bearer {token}"},
                        )
                    assert response.status_code == 200, response.text
                    # Within a second: by the doorbell, not the re-check every few seconds.
                    return code, still, await receive_until(agent, of_type("decision", ref="r"), timeout=1)

            code, still, decision = asyncio.run(scenario())
        assert code == CLOSE_EVENTS_LOST
        assert still["id"] == decision["id"]
        assert decision["decision"]["behavior"] == "allow"


class CardLookupTests:
    def test_the_sockets_after_the_first_share_its_card_until_it_is_old_then_read_afresh(
        self, alice: Any, bob: Any, ci_bot: Any
    ) -> None:
        """A membership change reaches the sockets that handle the event once its card is old."""
        pending = services.request_submit(agent=ci_bot.agent, call={**ask_call(), "tool_use_id": "toolu_age"}).request
        event = {"type": "request.created", "request_id": str(pending.pk)}
        cards = fanout.CardFanout()

        async def scenario() -> tuple[Any, list[Any], Any, Any]:
            first = await asyncio.wait_for(cards.card(event), 10)
            others = [await asyncio.wait_for(cards.card(event), 10) for _ in range(19)]
            await in_thread(lambda: Membership.objects.filter(user=bob).update(role="approver"))
            still = await asyncio.wait_for(cards.card(event), 10)
            # The entry made when the first socket asked, aged past what a card is kept for.
            [key] = [key for key in cards._entries if key[1] == pending.pk]
            started, future = cards._entries[key]
            cards._entries[key] = (started - fanout.RETAIN_SECONDS, future)
            afresh = await asyncio.wait_for(cards.card(event), 10)
            return first, others, still, afresh

        first, others, still, afresh = asyncio.run(scenario())
        assert first is not None and all(card is first for card in others) and still is first
        assert DECIDE_FORM not in (first.html_for(bob) or "")  # a viewer when the card was read
        assert afresh is not first and DECIDE_FORM in (afresh.html_for(bob) or "")

    def test_an_event_that_names_no_request_has_no_card_and_breaks_nothing(self, ci_bot: Any) -> None:
        """Whatever a doorbell from Redis holds: no card, no exception (an unhashable id raised one)."""
        pending = services.request_submit(agent=ci_bot.agent, call={**ask_call(), "tool_use_id": "toolu_odd"}).request
        good: dict[str, Any] = {"type": "request.created", "request_id": str(pending.pk)}
        spellings: list[Any] = ["not-a-uuid", "", None, 7, "0" * 31 + "g", ["a"], {}]
        odd: list[dict[str, Any]] = [
            *({**good, "request_id": spelling} for spelling in spellings),
            {**good, "type": ["request.created"]},
            {**good, "type": None},
            {**good, "decision_id": ["1"]},
            {**good, "decision_id": {"id": 1}},
            {key: value for key, value in good.items() if key != "request_id"},
        ]
        cards = fanout.CardFanout()

        async def scenario() -> tuple[list[Any], Any]:
            # Twice each: the second ask finds no entry the first could have made.
            answers = [await cards.card(event) for event in odd for _ in range(2)]
            cards.read_together(odd)
            assert not any(cards.reading(event) for event in odd)
            return answers, await asyncio.wait_for(cards.card(good), 10)

        answers, card = asyncio.run(scenario())
        assert answers == [None] * (2 * len(odd))
        assert card is not None and card.id == str(pending.pk)  # the read of them all went on


class EncodedOnceTests:
    """Every socket of a variant sends the same frame, encoded by the first of them."""

    def test_each_variant_is_encoded_once_and_each_user_gets_theirs(
        self, alice: Any, bob: Any, carol: Any, mallory: Any, ci_bot: Any
    ) -> None:
        pending = services.request_submit(agent=ci_bot.agent, call={**ask_call(), "tool_use_id": "toolu_enc"}).request
        card = fanout.load_cards([pending.pk])[pending.pk]
        assert card is not None

        for_alice = card_frame(card, alice, "request.created")
        for_carol = card_frame(card, carol, "request.created")
        for_bob = card_frame(card, bob, "request.created")
        assert for_alice is not None and for_bob is not None
        assert for_carol is for_alice  # approver and admin share the approver's frame, encoded once
        assert card_frame(card, alice, "request.created") is for_alice
        assert for_bob is not for_alice and card_frame(card, bob, "request.created") is for_bob
        assert card_frame(card, mallory, "request.created") is None  # another team's approver

        frame = json.loads(for_alice)
        assert frame == {"type": "request.created", "id": str(pending.pk), "html": card.html_approver}
        assert DECIDE_FORM in frame["html"] and DECIDE_FORM not in json.loads(for_bob)["html"]

    def test_a_frame_carries_its_own_event_fields(self, alice: Any, ci_bot: Any) -> None:
        pending = services.request_submit(agent=ci_bot.agent, call={**ask_call(), "tool_use_id": "toolu_ev"}).request
        card = fanout.load_cards([pending.pk])[pending.pk]
        assert card is not None
        allowed = card_frame(card, alice, "request.decided", behavior="allow", decided_by="alice", surface="web")
        denied = card_frame(card, alice, "request.decided", behavior="deny", decided_by="bob", surface="slack")
        updated = card_frame(card, alice, "request.updated")
        assert allowed is not None and denied is not None and updated is not None
        assert json.loads(allowed) | {"html": ""} == {
            "type": "request.decided",
            "id": str(pending.pk),
            "html": "",
            "behavior": "allow",
            "decided_by": "alice",
            "surface": "web",
        }
        assert json.loads(denied)["decided_by"] == "bob" and json.loads(updated)["type"] == "request.updated"
