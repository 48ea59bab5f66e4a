"""Cards of calls decided at submit reach the dashboards gathered per tick, in order, to those who may see them."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import httpx
import pytest
import redis.asyncio
from channels.db import database_sync_to_async
from django.db import connection, transaction
from django.test import override_settings
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from approvals import events, selectors, services, teambus
from relay import fanout
from relay.consumers.dashboard import MAX_FRAME_BYTES, batch_frame, batch_parts
from relay.frames import check_frame
from tests.live import live_server
from tests.relay.redis_server import private_redis
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
from tests.round_trips import round_trips

WAIT = 10.0


def decided_call(n: int) -> dict[str, Any]:
    """A call the team's `Bash(git log:*)` rule allows at submit."""
    return {
        "tool_name": "Bash",
        "tool_input": {"command": f"git log -{n + 1}"},
        "session_id": "s1",
        "cwd": "/tmp/proj",
        "tool_use_id": f"toolu_gathered_{n}",
    }


# -- the process's groups: what every inbox gets, and when ----------------------------------

# A doorbell as the bus carries it: at_submit ones are gathered, the others handed over at once.
AT_SUBMIT = st.builds(
    lambda n: {"type": "request.decided", "request_id": f"auto-{n}", "at_submit": True}, st.integers(0, 10**6)
)
OTHER = st.sampled_from(
    [
        {"type": "request.created", "request_id": "ask"},
        {"type": "request.decided", "request_id": "ask"},
        {"type": "request.updated", "request_id": "ask"},
        {"type": "request.claimed", "request_id": "ask", "by": "alice", "sender": "x"},
    ]
)
# "tick": wait until what was gathered is handed over (the tick passed with nothing else rung).
STEPS = st.lists(st.one_of(AT_SUBMIT, OTHER, st.just("tick")), max_size=25)


class Inbox:
    """A socket's inbox as the groups fill it, read as the socket reads it."""

    def __init__(self) -> None:
        self.queue = fanout.Inbox()
        self.events: list[dict[str, Any]] = []  # gathered events in their place
        self.gathered: list[list[dict[str, Any]]] = []

    def read(self) -> int:
        """Take what is in the inbox now; how many events (or gathered lists) that was."""
        count = 0
        while not self.queue.empty():
            self._take(self.queue.get_nowait())
            count += 1
        return count

    async def read_next(self) -> None:
        """Wait for the next one (the tick's hand-over)."""
        self._take(await asyncio.wait_for(self.queue.get(), WAIT))

    def _take(self, event: dict[str, Any]) -> None:
        if event["type"] == fanout.GATHERED:
            self.gathered.append(event["events"])
            self.events.extend(event["events"])
        else:
            self.events.append(event)


class GatheringOrderTests:
    @override_settings(REDIS_URL="")
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(steps=STEPS)
    def test_every_inbox_gets_each_event_at_once_and_the_newest_gathered_per_tick(self, steps: list[Any]) -> None:
        async def scenario() -> tuple[list[Inbox], list[dict[str, Any]]]:
            groups = fanout.LocalGroups(hand_over_seconds=0)  # the order, not the spacing (below)
            inboxes = [Inbox(), Inbox()]
            for inbox in inboxes:
                await groups.join("team.1", inbox.queue)
            expected: list[dict[str, Any]] = []
            gathering: list[dict[str, Any]] = []  # at_submit doorbells rung since the last hand-over
            for step in [*steps, "tick"]:
                if step == "tick":
                    if gathering:
                        for inbox in inboxes:
                            await inbox.read_next()
                        expected += gathering[-selectors.RECENT_FINISHED :]
                    gathering = []
                    continue
                await teambus.publish("team.1", step)
                got = [inbox.read() for inbox in inboxes]
                if step.get("at_submit"):
                    gathering.append(step)
                    assert got == [0, 0]  # gathered, not handed over yet
                else:
                    # Handed over at once, whatever is gathered: no at_submit call has another event.
                    assert got == [1, 1]
                    expected.append(step)
            for inbox in inboxes:
                await groups.leave("team.1", inbox.queue)
            return inboxes, expected

        inboxes, expected = asyncio.run(scenario())
        for inbox in inboxes:
            assert inbox.events == expected
            assert all(batch and all(e.get("at_submit") for e in batch) for batch in inbox.gathered)
            assert all(len(batch) <= selectors.RECENT_FINISHED for batch in inbox.gathered)

    @override_settings(REDIS_URL="")
    def test_a_socket_that_leaves_before_the_tick_gets_nothing_and_the_tick_is_stopped(self) -> None:
        async def scenario() -> tuple[list[dict[str, Any]], int]:
            groups = fanout.LocalGroups()
            stays, leaves = Inbox(), Inbox()
            await groups.join("team.2", stays.queue)
            await groups.join("team.2", leaves.queue)
            await teambus.publish("team.2", {"type": "request.decided", "request_id": "a", "at_submit": True})
            await groups.leave("team.2", leaves.queue)
            await stays.read_next()
            await groups.leave("team.2", stays.queue)
            # The last one gone, the group is dropped; a doorbell now reaches nobody.
            await teambus.publish("team.2", {"type": "request.decided", "request_id": "b", "at_submit": True})
            return stays.events, leaves.read()

        events, left = asyncio.run(scenario())
        assert [e["request_id"] for e in events] == ["a"] and left == 0


class HandOverSpacingTests:
    @override_settings(REDIS_URL="")
    def test_the_first_after_a_quiet_spell_waits_the_tick_and_the_next_the_interval(self) -> None:
        interval = 2.0

        async def scenario() -> tuple[float, float, list[list[str]]]:
            loop = asyncio.get_running_loop()
            groups = fanout.LocalGroups(hand_over_seconds=interval)
            inbox = Inbox()
            await groups.join("team.8", inbox.queue)
            rung = loop.time()
            await teambus.publish("team.8", {"type": "request.decided", "request_id": "a", "at_submit": True})
            await inbox.read_next()
            first = loop.time()
            for n in range(3):  # a flood right after it waits for the interval, then comes as one
                await teambus.publish("team.8", {"type": "request.decided", "request_id": f"b{n}", "at_submit": True})
            await inbox.read_next()
            second = loop.time()
            await groups.leave("team.8", inbox.queue)
            return first - rung, second - first, [[e["request_id"] for e in batch] for batch in inbox.gathered]

        first_wait, gap, batches = asyncio.run(scenario())
        assert fanout.GATHER_SECONDS <= first_wait < interval
        assert gap >= interval
        assert batches == [["a"], ["b0", "b1", "b2"]]


class FallingBehindTests:
    """A socket that stops reading is told it lost its events, at the bound, at once; the others hear on."""

    @override_settings(REDIS_URL="")
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(bound=st.integers(1, 6), steps=st.lists(OTHER, min_size=1, max_size=20), frame_at=st.integers(0, 20))
    def test_the_inbox_at_the_bound_drops_its_events_keeps_its_frames_and_gets_lost_once(
        self, bound: int, steps: list[dict[str, Any]], frame_at: int
    ) -> None:
        # What the socket's client sent, forwarded into the same inbox among the events.
        frame = {"type": "websocket.receive", "text": '{"type": "ping"}'}

        async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
            groups = fanout.LocalGroups(max_backlog=bound)
            reading, stuck = Inbox(), Inbox()
            await groups.join("team.3", reading.queue)
            await groups.join("team.3", stuck.queue)
            await groups.join("team.4", stuck.queue)  # behind on one group is behind on all
            for n, step in enumerate(steps):
                if n == frame_at:
                    stuck.queue.put_nowait(frame)
                await teambus.publish("team.3", step)
                await teambus.publish("team.4", step)
                reading.read()
            # Its next socket, a new inbox, hears the group.
            again = Inbox()
            await groups.join("team.3", again.queue)
            await teambus.publish("team.3", steps[0])
            heard_again = again.read()
            reading.read()
            stuck.read()
            for inbox in (again, reading, stuck):
                await groups.leave("team.3", inbox.queue)
            await groups.leave("team.4", stuck.queue)
            # Every inbox gone: the group is dropped, and its events reach no one.
            await teambus.publish("team.3", steps[0])
            assert reading.read() == 0 and stuck.read() == 0
            return reading.events, stuck.events, heard_again

        heard, stuck, heard_again = asyncio.run(scenario())
        assert heard == [*steps, steps[0]] and heard_again == 1
        # Unread, it fills with the two groups' events (and the client's frame, which no
        # bound holds back) until an event finds it full: from there it holds the frame,
        # if it came, then one `fanout.lost` from that event's group, then any later frame.
        expected: list[dict[str, Any]] = []
        behind = False
        for n, step in enumerate([*steps, steps[0]]):  # the last: the team.3 event the new inbox heard
            if n == frame_at < len(steps):
                expected.append(frame)
            for group in ("team.3", "team.4") if n < len(steps) else ("team.3",):
                if behind:
                    continue
                if len(expected) < bound:
                    expected.append(step)
                    continue
                expected = [m for m in expected if m is frame]
                expected.append({"type": fanout.LOST, "group": group, "behind": bound})
                behind = True
        assert stuck == expected


@pytest.mark.django_db(transaction=True)
class CardsReadOnArrivalTests:
    @override_settings(REDIS_URL="")
    def test_a_group_that_shows_cards_starts_reading_each_as_its_event_arrives(self, ci_bot: Any) -> None:
        pending = services.request_submit(agent=ci_bot.agent, call=ask_call("rm -rf on-arrival")).request
        created = {"type": "request.created", "request_id": str(pending.pk)}
        to_the_agent = {"type": "request.decided", "request_id": str(pending.pk), "decision_id": 1}

        async def scenario() -> tuple[bool, bool, str]:
            groups = fanout.LocalGroups()
            dashboard, agent = Inbox(), Inbox()
            await groups.join("team.5", dashboard.queue, cards=True)
            await groups.join("agent.5", agent.queue)
            await teambus.publish("agent.5", to_the_agent)
            await teambus.publish("team.5", created)
            # Before any socket has read its inbox: the dashboards' card is on its way,
            # and nothing is read for the agent's socket, which shows no card.
            reading = (fanout.CARDS.reading(created), fanout.CARDS.reading(to_the_agent))
            card = await asyncio.wait_for(fanout.CARDS.card(created), WAIT)
            assert card is not None
            for group, inbox in (("team.5", dashboard), ("agent.5", agent)):
                await groups.leave(group, inbox.queue)
            return *reading, card.html_approver

        for_dashboards, for_the_agent, html = asyncio.run(scenario())
        assert for_dashboards and not for_the_agent
        assert "on-arrival" in html

    @override_settings(REDIS_URL="")
    def test_the_cards_of_a_tick_are_read_together_at_hand_over(self, ci_bot: Any, alice: Any) -> None:
        services.rule_create(rule="Bash(git log:*)", behavior="allow", source="projectSettings", team=ci_bot.agent.team)
        # More than the page keeps: only the newest `RECENT_FINISHED` are read.
        count = selectors.RECENT_FINISHED + 2
        decided = [services.request_submit(agent=ci_bot.agent, call=decided_call(n)).request for n in range(count)]
        events = [
            {"type": "request.decided", "request_id": str(r.pk), "decision_id": r.decision_id, "at_submit": True}
            for r in decided
        ]

        async def scenario() -> tuple[list[bool], list[bool], list[fanout.PushedCard | None]]:
            groups = fanout.LocalGroups()
            dashboard = Inbox()
            await groups.join("team.6", dashboard.queue, cards=True)
            for event in events:
                await teambus.publish("team.6", event)
            gathering = [fanout.CARDS.reading(event) for event in events]
            await dashboard.read_next()  # the tick's hand-over
            handed_over = [fanout.CARDS.reading(event) for event in events]
            cards = [await asyncio.wait_for(fanout.CARDS.card(event), WAIT) for event in events[2:]]
            await groups.leave("team.6", dashboard.queue)
            return gathering, handed_over, cards

        gathering, handed_over, cards = asyncio.run(scenario())
        # Nothing is read while the tick gathers; the newest it keeps once it hands them over.
        assert gathering == [False] * count and handed_over == [False] * 2 + [True] * selectors.RECENT_FINISHED
        assert [card.id if card else None for card in cards] == [str(r.pk) for r in decided[2:]]
        assert all(card is not None and f"git log -{n + 3}" in card.html_approver for n, card in enumerate(cards))
        assert all(card is not None and card.html_for(alice) == card.html_approver for card in cards)

    def test_reading_a_tick_of_cards_takes_two_statements_in_one_round_trip(
        self, ci_bot: Any, alice: Any, mallory: Any
    ) -> None:
        services.rule_create(rule="Bash(git log:*)", behavior="allow", source="projectSettings", team=ci_bot.agent.team)
        decided = [services.request_submit(agent=ci_bot.agent, call=decided_call(n)).request for n in range(5)]
        unknown = uuid.uuid4()
        with round_trips() as trips:
            cards = fanout.load_cards([*(r.pk for r in decided), unknown])
        # The requests with their decisions, and their team's members, sent in one round
        # trip on PostgreSQL (a pending card also reads what changed since the last allowed
        # call like it, per card).
        assert len(trips) == (1 if connection.vendor == "postgresql" else 2), trips
        assert cards[unknown] is None
        for n, request in enumerate(decided):
            card = cards[request.pk]
            assert card is not None and f"git log -{n + 1}" in card.html_approver
            assert card.html_for(alice) == card.html_approver and card.html_for(mallory) is None
            alone = fanout.load_cards([request.pk])[request.pk]
            assert alone is not None and (alone.html_approver, alone.roles) == (card.html_approver, card.roles)


class ShownOfTests:
    @given(steps=st.lists(st.one_of(AT_SUBMIT, OTHER), max_size=30))
    def test_a_tick_shows_the_newest_cards_the_page_keeps_oldest_first(self, steps: list[dict[str, Any]]) -> None:
        shown = fanout.shown_of(steps)
        cards = [step for step in steps if step["type"] in fanout.CARD_EVENTS]
        assert shown == cards[max(len(cards) - selectors.RECENT_FINISHED, 0) :]
        assert len(shown) == min(len(cards), selectors.RECENT_FINISHED)


class FramePartsTests:
    @given(sizes=st.lists(st.integers(1, 140 * 1024), max_size=30))
    @example(sizes=[1000, 120000, 140796])  # the frames' weights add up to the limit: the envelope is over it
    def test_a_batch_is_cut_into_frames_under_the_limit_keeping_every_card_in_order(self, sizes: list[int]) -> None:
        frames = [
            json.dumps(
                {
                    "type": "request.decided",
                    "id": str(n),
                    "html": "x" * size,
                    "behavior": "allow",
                    "decided_by": "rule",
                    "surface": "engine",
                }
            )
            for n, size in enumerate(sizes)
        ]
        parts = batch_parts(frames)
        assert [f for part in parts for f in part] == frames
        assert all(part for part in parts)
        for part in parts:
            text = batch_frame(part)
            decoded = json.loads(text)
            check_frame(decoded)
            assert [f["id"] for f in decoded["frames"]] == [json.loads(f)["id"] for f in part]
            # Over the limit only when one card alone is (a card is at most 64 KiB, escaped at most 2x).
            assert len(text.encode()) <= MAX_FRAME_BYTES or len(part) == 1


# -- on a live server, through the real bus and consumers -----------------------------------


@pytest.mark.django_db(transaction=True)
class GatheredLiveTests:
    def test_calls_decided_at_submit_come_in_a_batch_to_the_team_in_order_and_an_ask_alone(
        self, relay_server: Any, alice: Any, bob: Any, mallory: Any, ci_bot: Any
    ) -> None:
        services.rule_create(rule="Bash(git log:*)", behavior="allow", source="projectSettings", team=ci_bot.agent.team)

        def submit_decided() -> list[str]:
            # One transaction: the doorbells ring together at its commit, well within a tick.
            with transaction.atomic():
                count = selectors.RECENT_FINISHED + 3
                results = [services.request_submit(agent=ci_bot.agent, call=decided_call(n)) for n in range(count)]
            assert all(r.decision is not None and r.decision.behavior == "allow" for r in results)
            return [str(r.request.pk) for r in results]

        async def read_both(ws: Any, ask_id: str, last_id: str) -> list[dict[str, Any]]:
            """The frames until the ask's card and the batch's last call have come, in order."""
            frames: list[dict[str, Any]] = []
            async with asyncio.timeout(WAIT):
                while not (
                    any(f["type"] == "request.created" and f["id"] == ask_id for f in frames)
                    and any(f["type"] == "batch" and f["frames"][-1]["id"] == last_id for f in frames)
                ):
                    frame = json.loads(await ws.recv())
                    check_frame(frame)
                    frames.append(frame)
            return frames

        cookies = [session_cookie(user) for user in (alice, bob, mallory)]

        async def scenario() -> tuple[list[str], str, list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
            async with (
                dashboard_connect(relay_server, cookies[0]) as approver,
                dashboard_connect(relay_server, cookies[1]) as viewer,
                dashboard_connect(relay_server, cookies[2]) as outsider,
            ):
                for ws in (approver, viewer, outsider):
                    await send(ws, {"type": "subscribe"})
                    await receive_until(ws, of_type("snapshot"))
                decided = await in_thread(submit_decided)
                ask = await in_thread(services.request_submit, agent=ci_bot.agent, call=ask_call())
                ask_id = str(ask.request.pk)
                for_alice = await read_both(approver, ask_id, decided[-1])
                for_bob = await read_both(viewer, ask_id, decided[-1])
                await send(outsider, {"type": "ping"})
                return decided, ask_id, for_alice, for_bob, await receive(outsider)

        decided, ask_id, for_alice, for_bob, outsider_next = asyncio.run(scenario())
        for frames in (for_alice, for_bob):
            # The ask comes alone as it is asked (not held for the tick); the calls in batches.
            assert [f["id"] for f in frames if f["type"] != "batch"] == [ask_id], [f["type"] for f in frames]
            batches = [f for f in frames if f["type"] == "batch"]
            items = [item for batch in batches for item in batch["frames"]]
            # The newest the page keeps, oldest first (each goes on top of "Recently decided").
            assert [item["id"] for item in items] == decided[-selectors.RECENT_FINISHED :]
            assert len(batches) < len(items)  # gathered, not one frame per call
            assert all(item["behavior"] == "allow" and item["surface"] == "engine" for item in items)
            assert all(f'id="req-{item["id"]}"' in item["html"] and "git log" in item["html"] for item in items)
        # Mallory approves another team: none of it reaches her.
        assert outsider_next["type"] == "error" and outsider_next["code"] == "unknown_type"

    def test_calls_decided_at_submit_on_one_process_reach_another_process_gathered(
        self, alice: Any, ci_bot: Any
    ) -> None:
        """Submitted over HTTP to one server, shown by a dashboard of the other: the first
        published them gathered, a message per tick and not one per call."""
        team = ci_bot.agent.team
        services.rule_create(rule="Bash(git log:*)", behavior="allow", source="projectSettings", team=team)
        auth = {"Authorization": f"Bearer {ci_bot.token}"}
        count = selectors.RECENT_FINISHED + 7
        cookie = session_cookie(alice)

        def submit_all(url: str) -> list[str]:
            with httpx.Client(base_url=url, headers=auth, timeout=WAIT) as client:
                answers = [client.post("/api/v1/permission-requests", json=decided_call(n)) for n in range(count)]
            assert all(a.status_code == 200 and a.json()["decision"]["behavior"] == "allow" for a in answers)
            return [a.json()["id"] for a in answers]

        async def scenario(one: Any, other: Any, url: str) -> tuple[list[str], list[dict[str, Any]], list[Any]]:
            raw = redis.asyncio.Redis.from_url(url).pubsub()
            await raw.subscribe(teambus.channel(events.team_group(team.pk)))
            async with dashboard_connect(other, cookie) as dashboard:
                await send(dashboard, {"type": "subscribe"})
                await receive_until(dashboard, of_type("snapshot"))
                decided = await in_thread(submit_all, one.url)
                items: list[dict[str, Any]] = []
                async with asyncio.timeout(WAIT):
                    while not items or items[-1]["id"] != decided[-1]:
                        frame = json.loads(await dashboard.recv())
                        check_frame(frame)
                        if frame["type"] == "batch":
                            items.extend(frame["frames"])
            published: list[Any] = []
            async with asyncio.timeout(WAIT):
                while sum(len(message.get("events", [])) for message in published) < count:
                    message = await raw.get_message(ignore_subscribe_messages=True, timeout=WAIT)
                    if message is not None:
                        published.append(json.loads(message["data"]))
            await raw.aclose()  # type: ignore[attr-defined]  # redis 5+ has it; the stubs predate it
            return decided, items, published

        with (
            private_redis() as redis_server,
            live_server(REDIS_URL=redis_server.url) as one,
            live_server(REDIS_URL=redis_server.url) as other,
        ):
            decided, items, published = asyncio.run(scenario(one, other, redis_server.url))
        # The other process's dashboard: the newest the page keeps, in the order decided.
        assert [item["id"] for item in items][-selectors.RECENT_FINISHED :] == decided[-selectors.RECENT_FINISHED :]
        assert all(f'id="req-{item["id"]}"' in item["html"] for item in items)
        # Published gathered: every call once, in order, in fewer messages than calls.
        assert all(set(message) == {"origin", "events"} for message in published), published
        assert [event["request_id"] for message in published for event in message["events"]] == decided
        assert len(published) < count


@pytest.mark.django_db(transaction=True)
class CardReadWhereCommittedTests:
    @override_settings(REDIS_URL="")
    def test_an_ask_committed_in_a_process_showing_its_team_has_its_card_read_in_its_own_message(
        self, ci_bot: Any, alice: Any
    ) -> None:
        team_group = events.team_group(ci_bot.agent.team_id)

        def submit(command: str) -> tuple[Any, list[list[str]]]:
            with round_trips() as trips:
                request = services.request_submit(agent=ci_bot.agent, call=ask_call(command)).request
            return request, trips

        async def created(inbox: Inbox) -> dict[str, Any]:
            while True:
                await inbox.read_next()
                if inbox.events[-1]["type"] == "request.created":
                    return inbox.events[-1]

        async def scenario() -> tuple[Any, list[list[str]], fanout.PushedCard | None, list[list[str]]]:
            # The server's way: the submit runs on a worker thread of the loop its sockets run on.
            in_worker = database_sync_to_async(submit, thread_sensitive=False)
            # The session's denial state saved by an earlier call: the ask writes nothing else,
            # so on PostgreSQL its insert is a transaction of one message (approvals.written).
            before, _ = await in_worker("rm -rf before")
            # A person allowed a call like it: the card says what changed since.
            allow = services.Answer(behavior="allow", surface="web", user=alice)
            await database_sync_to_async(services.request_decide)(before.pk, allow)
            dashboard = Inbox()
            await fanout.GROUPS.join(team_group, dashboard.queue, cards=True)
            try:
                request, statements = await in_worker("rm -rf read-here")
                event = await asyncio.wait_for(created(dashboard), WAIT)
                card = await asyncio.wait_for(fanout.CARDS.card(event), WAIT)
            finally:
                await fanout.GROUPS.leave(team_group, dashboard.queue)
            # No socket of this process shows the team's cards: the committing thread reads none.
            _, without = await in_worker("rm -rf read-elsewhere")
            return request, statements, card, without

        request, trips, card, without = asyncio.run(scenario())
        statements = [sql for trip in trips for sql in trip]

        def card_reads(sql: list[str]) -> list[str]:
            return [s for s in sql if 'FROM "approvals_membership"' in s and '"team_id" IN' in s]

        assert len(card_reads(statements)) == 1, statements
        # What changed since the allow is read with the card.
        since_reads = [s for s in statements if "gh_recent" in s]
        assert len(since_reads) == 1, statements
        if connection.vendor == "postgresql":
            # The call's context, then one round trip, the ask's transaction: its insert,
            # its card and what changed since.
            assert len(trips) == 2, trips
            [card_trip] = [trip for trip in trips if card_reads(trip)]
            assert since_reads[0] in card_trip, trips
            assert any(s.startswith('INSERT INTO "approvals_permissionrequest"') for s in card_trip), trips
        assert card_reads([sql for trip in without for sql in trip]) == [], without
        # The card the sockets take is the card read afresh, and Alice may decide it.
        fresh = fanout.load_cards([request.pk])[request.pk]
        assert card is not None and fresh is not None

        # The countdown's text is the time left when each was rendered ("5 min left", then
        # "4 min 59 s left"): the rest of the card is the same, its deadline included.
        def timeless(html: str) -> str:
            return re.sub(r'(<span class="countdown"[^>]*>)[^<]*(</span>)', r"\1\2", html)

        assert (card.id, timeless(card.html_approver), card.roles) == (
            fresh.id,
            timeless(fresh.html_approver),
            fresh.roles,
        )
        assert card.html_for(alice) == card.html_approver and "rm -rf read-here" in card.html_approver
        assert "alice allowed a call like this" in card.html_approver
