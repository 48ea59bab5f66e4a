"""The teams' doorbells on Redis pub/sub: heard once per subscription, and a broken one says so."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any

import pytest
import redis
import redis.asyncio
from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals import events, teambus
from approvals.models import PermissionRequest
from relay import fanout
from tests.relay.redis_server import private_redis
from tests.teamlisten import team_listener

WAIT = 10.0


class RecordingLayer:
    """The channel layer's `group_send` for the groups off the bus (a request's waiters)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def group_send(self, group: str, event: dict[str, Any]) -> None:
        self.sent.append((group, event))


class Heard:
    def __init__(self) -> None:
        self.events: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self.lost: asyncio.Queue[BaseException] = asyncio.Queue()

    def subscribe(self) -> teambus.Subscription:
        return teambus.subscribe(lambda group, event: self.events.put_nowait((group, event)), self.lost.put_nowait)

    async def next(self) -> tuple[str, dict[str, Any]]:
        return await asyncio.wait_for(self.events.get(), WAIT)


@pytest.fixture
def redis_url() -> Any:
    with private_redis() as server, override_settings(REDIS_URL=server.url):
        yield server


async def ring_from_another_process(url: str, group: str, event: dict[str, Any]) -> None:
    """A doorbell as another server process publishes it: only Redis brings it here."""
    client = redis.asyncio.Redis.from_url(url)
    try:
        await client.publish(teambus.channel(group), teambus.wire(event, origin="another-process"))
    finally:
        await client.aclose()  # type: ignore[attr-defined]  # redis 5+ has it; the stubs predate it


class RedisBusTests:
    def test_groups_subscribed_at_once_each_hear_their_own_doorbells(self, redis_url: Any) -> None:
        async def scenario() -> list[tuple[str, dict[str, Any]]]:
            heard = Heard()
            subscription = heard.subscribe()
            # Joined together, as two dashboards of two teams connecting at once.
            await asyncio.wait_for(asyncio.gather(*(subscription.add(f"team.{n}") for n in (1, 2, 3))), WAIT)
            for n in (3, 1, 4, 2):
                await ring_from_another_process(
                    redis_url.url, f"team.{n}", {"type": "request.created", "request_id": str(n)}
                )
            got = [await heard.next() for _ in range(3)]
            await subscription.remove("team.1")
            await ring_from_another_process(redis_url.url, "team.1", {"type": "request.created", "request_id": "gone"})
            await teambus.publish("team.1", {"type": "request.created", "request_id": "gone, ours"})
            await ring_from_another_process(redis_url.url, "team.2", {"type": "test.marker"})
            got.append(await heard.next())
            await subscription.close()
            return got

        assert asyncio.run(scenario()) == [
            ("team.3", {"type": "request.created", "request_id": "3"}),
            ("team.1", {"type": "request.created", "request_id": "1"}),
            ("team.2", {"type": "request.created", "request_id": "2"}),
            ("team.2", {"type": "test.marker"}),
        ]

    @pytest.mark.parametrize("fault", ["restart", "connection_dropped"])
    def test_a_subscription_that_breaks_says_so_once_and_a_new_one_hears_again(
        self, redis_url: Any, fault: str
    ) -> None:
        def break_it() -> None:
            if fault == "restart":
                redis_url.restart()
            else:  # Redis stays up and drops the subscriber's connection (a proxy or failover reset)
                redis.Redis.from_url(redis_url.url).client_kill_filter(_type="pubsub")

        async def scenario() -> tuple[BaseException, int, tuple[str, dict[str, Any]]]:
            heard = Heard()
            subscription = heard.subscribe()
            await subscription.add("team.1")
            await asyncio.to_thread(break_it)
            # Not resubscribed quietly: what was rung meanwhile would be a gap nobody noticed.
            lost = await asyncio.wait_for(heard.lost.get(), WAIT + teambus.HEALTH_CHECK_SECONDS)
            again = Heard()
            fresh = again.subscribe()
            await fresh.add("team.1")
            await ring_from_another_process(redis_url.url, "team.1", {"type": "request.created", "request_id": "after"})
            got = await again.next()
            await subscription.close()
            await fresh.close()
            return lost, heard.lost.qsize(), got

        lost, lost_again, got = asyncio.run(scenario())
        assert isinstance(lost, Exception) and lost_again == 0
        assert got == ("team.1", {"type": "request.created", "request_id": "after"})


class OwnDoorbellTests:
    def test_the_process_hears_its_own_doorbells_once_and_at_once(self, redis_url: Any) -> None:
        """Handed over as they are rung; the copy Redis sends back is dropped; other processes hear it."""

        async def scenario() -> tuple[list[tuple[str, dict[str, Any]]], int, dict[str, Any]]:
            heard = Heard()
            subscription = heard.subscribe()
            await subscription.add("team.1")
            raw = redis.asyncio.Redis.from_url(redis_url.url).pubsub()
            await raw.subscribe(teambus.channel("team.1"))
            await raw.get_message(timeout=WAIT)  # the subscribe confirmation
            await teambus.publish("team.1", {"type": "request.created", "request_id": "ours"})
            at_once = heard.events.qsize()  # before this loop ran anything else
            published = await raw.get_message(timeout=WAIT)
            # Another process's doorbell after ours: by the time it is heard, ours came back too.
            await ring_from_another_process(redis_url.url, "team.1", {"type": "test.marker"})
            got = [await heard.next(), await heard.next()]
            await raw.aclose()  # type: ignore[attr-defined]
            await subscription.close()
            assert heard.events.empty(), "our own doorbell was heard twice"
            assert published is not None
            return got, at_once, json.loads(published["data"])

        got, at_once, published = asyncio.run(scenario())
        assert at_once == 1
        assert got == [
            ("team.1", {"type": "request.created", "request_id": "ours"}),
            ("team.1", {"type": "test.marker"}),
        ]
        assert published == {"origin": teambus.ORIGIN, "event": {"type": "request.created", "request_id": "ours"}}

    def test_a_rung_doorbell_is_heard_here_before_it_is_published_the_agent_first(self, redis_url: Any) -> None:
        """The server's own sockets hear a doorbell as the loop rings it, not after its publishes' round trips."""
        request = PermissionRequest(id=uuid.uuid4(), agent_id=5, team_id=3)
        groups = events.request_groups(request)

        async def scenario() -> tuple[list[tuple[str, dict[str, Any]]], set[str]]:
            heard = Heard()
            subscription = heard.subscribe()
            for group in groups:
                if teambus.on_bus(group):
                    await subscription.add(group)
            elsewhere = redis.asyncio.Redis.from_url(redis_url.url).pubsub()
            await elsewhere.subscribe(*(teambus.channel(group) for group in groups if teambus.on_bus(group)))
            doorbells = events.Doorbells()
            event = {"type": "request.decided", "request_id": str(request.pk)}
            doorbells.ring(RecordingLayer(), groups, event)
            at_once = [heard.events.get_nowait() for _ in range(heard.events.qsize())]  # nothing awaited yet
            await asyncio.wait_for(doorbells.idle(), WAIT)
            published: set[str] = set()
            while len(published) < len(at_once):
                message = await elsewhere.get_message(ignore_subscribe_messages=True, timeout=WAIT)
                if message is not None:
                    published.add(message["channel"].decode())
            await elsewhere.aclose()  # type: ignore[attr-defined]
            await subscription.close()
            assert heard.events.empty(), "a doorbell was heard twice"
            return at_once, published

        at_once, published = asyncio.run(scenario())
        event = {"type": "request.decided", "request_id": str(request.pk)}
        assert at_once == [("agent.5", event), ("team.3", event), ("team.all", event)]
        assert published == {teambus.channel(group) for group in ("agent.5", "team.3", "team.all")}

    def test_a_hand_over_that_fails_is_logged_and_the_other_groups_still_ring(
        self, redis_url: Any, caplog: Any
    ) -> None:
        request = PermissionRequest(id=uuid.uuid4(), agent_id=5, team_id=3)
        groups = events.request_groups(request)
        event = {"type": "request.decided", "request_id": str(request.pk)}

        async def scenario() -> tuple[list[str], set[str]]:
            heard: list[str] = []

            def deliver(group: str, got: dict[str, Any]) -> None:
                if group == "agent.5":
                    raise RuntimeError("a socket's hand-over broke")
                heard.append(group)

            subscription = teambus.subscribe(deliver, lambda error: None)
            for group in ("agent.5", "team.3", "team.all"):
                await subscription.add(group)
            elsewhere = redis.asyncio.Redis.from_url(redis_url.url).pubsub()
            await elsewhere.subscribe(*(teambus.channel(g) for g in ("agent.5", "team.3", "team.all")))
            doorbells = events.Doorbells()
            doorbells.ring(RecordingLayer(), groups, event)
            await asyncio.wait_for(doorbells.idle(), WAIT)
            published: set[str] = set()
            while len(published) < 3:
                message = await elsewhere.get_message(ignore_subscribe_messages=True, timeout=WAIT)
                if message is not None:
                    published.add(message["channel"].decode())
            await elsewhere.aclose()  # type: ignore[attr-defined]
            await subscription.close()
            return heard, published

        heard, published = asyncio.run(scenario())
        assert heard == ["team.3", "team.all"]
        assert published == {teambus.channel(g) for g in ("agent.5", "team.3", "team.all")}
        assert "event request.decided to agent.5 was not delivered in this process" in caplog.text

    @pytest.mark.parametrize(
        "data",
        [
            b"not json",
            b"[1, 2]",
            b'{"event": {}}',
            b'{"origin": "x"}',
            b'{"origin": "x", "event": [1]}',
            b"null",
            b'{"origin": "x", "event": {}}',
            b'{"origin": "x", "event": {"type": ["request.created"], "request_id": "a"}}',
            b'{"origin": "x", "event": {"type": {"request": "created"}}}',
            b'{"origin": "x", "event": {"type": 7}}',
            b'{"origin": "x", "event": {"type": null, "at_submit": true}}',
            b'{"origin": "x", "events": []}',
            b'{"origin": "x", "events": {"type": "request.decided"}}',
            b'{"origin": "x", "events": [{"type": "request.decided"}, {"type": 7}]}',
            b'{"origin": "x", "events": [{"type": "request.decided"}, "request.decided"]}',
            b'{"origin": "x", "event": {"type": "request.decided"}, "events": [{"type": "request.decided"}]}',
            b'"origin events"',
        ],
        ids=[
            "not-json",
            "list",
            "no-origin",
            "no-event",
            "event-not-object",
            "null",
            "no-type",
            "type-a-list",
            "type-an-object",
            "type-a-number",
            "type-null-gathered",
            "events-empty",
            "events-not-a-list",
            "events-one-type-a-number",
            "events-one-not-object",
            "event-and-events",
            "text",
        ],
    )
    def test_a_malformed_doorbell_is_dropped_and_the_next_one_heard(self, redis_url: Any, data: bytes) -> None:
        async def scenario() -> tuple[str, dict[str, Any]]:
            heard = Heard()
            subscription = heard.subscribe()
            await subscription.add("team.1")
            client = redis.asyncio.Redis.from_url(redis_url.url)
            await client.publish(teambus.channel("team.1"), data)
            await client.aclose()  # type: ignore[attr-defined]  # redis 5+ has it; the stubs predate it
            await ring_from_another_process(redis_url.url, "team.1", {"type": "test.marker"})
            got = await heard.next()
            await subscription.close()
            assert heard.lost.empty()
            return got

        assert asyncio.run(scenario()) == ("team.1", {"type": "test.marker"})

    def test_a_doorbell_whose_type_is_not_text_costs_the_dashboards_nothing(self, redis_url: Any) -> None:
        """End to end through the process's groups: it was handed over, raised there, and the
        subscription counted itself lost, closing every socket of the process."""

        async def scenario() -> list[dict[str, Any]]:
            groups = fanout.LocalGroups()
            inbox = fanout.Inbox()
            await groups.join("team.1", inbox, cards=True)
            client = redis.asyncio.Redis.from_url(redis_url.url)
            odd = {"origin": "another-process", "event": {"type": ["request.created"], "request_id": "a"}}
            await client.publish(teambus.channel("team.1"), json.dumps(odd))
            await client.aclose()  # type: ignore[attr-defined]  # redis 5+ has it; the stubs predate it
            await ring_from_another_process(redis_url.url, "team.1", {"type": "test.marker"})
            got = [await asyncio.wait_for(inbox.get(), WAIT)]
            await groups.leave("team.1", inbox)
            while not inbox.empty():
                got.append(inbox.get_nowait())
            return got

        assert asyncio.run(scenario()) == [{"type": "test.marker"}]


class GatheredDoorbellTests:
    """Calls decided at submit: heard here as rung, published gathered, heard elsewhere one by one."""

    def test_a_gathered_message_is_heard_event_by_event_in_the_order_listed(self, redis_url: Any) -> None:
        listed = [{"type": "request.decided", "request_id": str(n), "at_submit": True} for n in range(5)]

        async def scenario() -> list[tuple[str, dict[str, Any]]]:
            heard = Heard()
            subscription = heard.subscribe()
            await subscription.add("team.1")
            client = redis.asyncio.Redis.from_url(redis_url.url)
            await client.publish(teambus.channel("team.1"), teambus.wire_gathered(listed, origin="another-process"))
            await client.publish(teambus.channel("team.1"), teambus.wire_gathered(listed))  # our own: heard already
            await client.aclose()  # type: ignore[attr-defined]  # redis 5+ has it; the stubs predate it
            await ring_from_another_process(redis_url.url, "team.1", {"type": "test.marker"})
            got = [await heard.next() for _ in range(len(listed) + 1)]
            await subscription.close()
            assert heard.events.empty()
            return got

        assert asyncio.run(scenario()) == [
            *(("team.1", event) for event in listed),
            ("team.1", {"type": "test.marker"}),
        ]

    def test_calls_decided_at_submit_are_heard_here_at_once_and_published_one_message_per_group(
        self, redis_url: Any
    ) -> None:
        rung = [
            (["team.1", "team.all"] if n % 2 else ["team.2", "team.all"], decided_at_submit(str(n))) for n in range(6)
        ]

        async def scenario() -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, Any]]]:
            heard = Heard()
            subscription = heard.subscribe()
            for group in ("team.1", "team.2", "team.all"):
                await subscription.add(group)
            elsewhere = redis.asyncio.Redis.from_url(redis_url.url).pubsub()
            await elsewhere.subscribe(*(teambus.channel(g) for g in ("team.1", "team.2", "team.all")))
            doorbells = events.Doorbells()
            for groups, event in rung:
                doorbells.ring(RecordingLayer(), groups, event)
            at_once = [heard.events.get_nowait() for _ in range(heard.events.qsize())]  # nothing awaited yet
            await asyncio.wait_for(doorbells.idle(), WAIT)
            await ring_from_another_process(redis_url.url, "team.all", {"type": "test.marker"})
            published = await raw_messages_until_marker(elsewhere)
            await elsewhere.aclose()  # type: ignore[attr-defined]
            await subscription.close()
            return at_once, published

        at_once, published = asyncio.run(scenario())
        assert at_once == [(group, event) for groups, event in rung for group in groups]
        assert published == [
            (teambus.channel("team.2"), {"origin": teambus.ORIGIN, "events": [e for g, e in rung if "team.2" in g]}),
            (teambus.channel("team.all"), {"origin": teambus.ORIGIN, "events": [e for _, e in rung]}),
            (teambus.channel("team.1"), {"origin": teambus.ORIGIN, "events": [e for g, e in rung if "team.1" in g]}),
        ]

    def test_a_later_doorbell_of_a_gathered_request_waits_for_the_gathered_publish(self, redis_url: Any) -> None:
        """A call decided at submit has no later doorbell today; should one come, it must not overtake."""

        async def scenario() -> list[tuple[str, Any]]:
            elsewhere = redis.asyncio.Redis.from_url(redis_url.url).pubsub()
            await elsewhere.subscribe(teambus.channel("team.1"))
            doorbells = events.Doorbells()
            doorbells.ring(RecordingLayer(), ["team.1"], decided_at_submit("a"))
            doorbells.ring(RecordingLayer(), ["team.1"], {"type": "request.updated", "request_id": "a"})
            doorbells.ring(RecordingLayer(), ["team.1"], {"type": "request.created", "request_id": "b"})
            await asyncio.wait_for(doorbells.idle(), WAIT)
            await ring_from_another_process(redis_url.url, "team.1", {"type": "test.marker"})
            published = await raw_messages_until_marker(elsewhere)
            await elsewhere.aclose()  # type: ignore[attr-defined]
            return published

        published = [message for _, message in asyncio.run(scenario())]
        assert published == [
            {"origin": teambus.ORIGIN, "event": {"type": "request.created", "request_id": "b"}},  # not held
            {"origin": teambus.ORIGIN, "events": [decided_at_submit("a")]},
            {"origin": teambus.ORIGIN, "event": {"type": "request.updated", "request_id": "a"}},
        ]

    def test_gathered_doorbells_redis_does_not_take_are_logged_and_the_next_are_published(
        self, redis_url: Any, caplog: Any
    ) -> None:
        async def scenario() -> list[tuple[str, Any]]:
            doorbells = events.Doorbells()
            await asyncio.to_thread(redis_url.stop)
            doorbells.ring(RecordingLayer(), ["team.1"], decided_at_submit("lost"))
            await asyncio.wait_for(doorbells.idle(), WAIT)
            await asyncio.to_thread(redis_url.start)
            elsewhere = redis.asyncio.Redis.from_url(redis_url.url).pubsub()
            await elsewhere.subscribe(teambus.channel("team.1"))
            doorbells.ring(RecordingLayer(), ["team.1"], decided_at_submit("after"))
            await asyncio.wait_for(doorbells.idle(), WAIT)
            await ring_from_another_process(redis_url.url, "team.1", {"type": "test.marker"})
            published = await raw_messages_until_marker(elsewhere)
            await elsewhere.aclose()  # type: ignore[attr-defined]
            return published

        published = asyncio.run(scenario())
        assert [message for _, message in published] == [
            {"origin": teambus.ORIGIN, "events": [decided_at_submit("after")]}
        ]
        assert "1 gathered event(s) to team.1 were not delivered" in caplog.text


def decided_at_submit(request_id: str) -> dict[str, Any]:
    return {"type": "request.decided", "request_id": request_id, "state": "allowed", "at_submit": True}


async def raw_messages_until_marker(pubsub: Any) -> list[tuple[str, Any]]:
    """The messages on a raw subscription (channel, the JSON published) before a `test.marker` event, within WAIT."""
    got: list[tuple[str, Any]] = []
    async with asyncio.timeout(WAIT):
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=WAIT)
            if message is None:
                continue
            published = json.loads(message["data"])
            if published.get("event", {}).get("type") == "test.marker":
                return got
            got.append((message["channel"].decode(), published))


# Any JSON, and objects shaped nearly as a doorbell.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
EVENT_LIKE = st.one_of(
    JSON,
    st.fixed_dictionaries({"type": JSON}, optional={"request_id": JSON, "at_submit": JSON}),
    st.fixed_dictionaries({"type": st.sampled_from(["request.decided", "request.created", ""])}),
)
DOORBELL_LIKE = st.fixed_dictionaries(
    {}, optional={"origin": JSON, "event": EVENT_LIKE, "events": st.one_of(JSON, st.lists(EVENT_LIKE, max_size=4))}
)


def as_doorbell(value: Any) -> list[dict[str, Any]] | None:
    """What a message means, said plainly: an object with an origin and either one event or a
    non-empty list of them, each an object whose type is text; None for anything else."""
    if not isinstance(value, dict) or "origin" not in value or ("event" in value) == ("events" in value):
        return None
    listed = value["events"] if "events" in value else [value["event"]]
    if not isinstance(listed, list) or not listed:
        return None
    if not all(isinstance(event, dict) and isinstance(event.get("type"), str) for event in listed):
        return None
    return listed


class HeardCorpusTests:
    @given(value=st.one_of(JSON, DOORBELL_LIKE))
    @settings(max_examples=400, deadline=None)
    def test_a_message_is_heard_only_as_an_origin_and_events_each_typed_by_text(self, value: Any) -> None:
        meant = as_doorbell(value)
        try:
            origin, listed = teambus.heard(json.dumps(value))
        except (ValueError, TypeError, KeyError):
            assert meant is None, value
        else:
            assert meant is not None and (origin, listed) == (value["origin"], meant), value


async def next_published(pubsub: Any) -> tuple[str, Any]:
    """The next message on a raw subscription (channel, the doorbell's event), within WAIT."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while asyncio.get_running_loop().time() < deadline:
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=WAIT)
        if message is not None:  # None: a subscribe confirmation, ignored
            return message["channel"].decode(), json.loads(message["data"])["event"]
    raise AssertionError("no doorbell published")


def publisher_connections(url: str) -> int:
    """The connections this process's publishers hold open in Redis."""
    return sum(1 for client in redis.Redis.from_url(url).client_list() if client["name"] == teambus.PUBLISHER_NAME)


class PublisherTests:
    def test_doorbells_rung_while_one_is_in_flight_follow_it_on_its_connection_in_order(self, redis_url: Any) -> None:
        """One connection and one pipeline at a time: what is rung meanwhile goes in the next."""

        async def scenario() -> tuple[list[tuple[str, Any]], int]:
            elsewhere = redis.asyncio.Redis.from_url(redis_url.url).pubsub()
            await elsewhere.subscribe(teambus.channel("team.1"), teambus.channel("team.all"))
            control = redis.asyncio.Redis.from_url(redis_url.url)
            await control.execute_command("CLIENT", "PAUSE", "10000", "WRITE")  # the first publish stays in flight
            first = asyncio.ensure_future(teambus.publish_elsewhere(["team.1", "team.all"], {"n": 0}))
            deadline = asyncio.get_running_loop().time() + WAIT
            while not await asyncio.to_thread(publisher_connections, redis_url.url):
                assert asyncio.get_running_loop().time() < deadline, "the first publish never reached Redis"
            rest = [teambus.publish_elsewhere(["team.1", "team.all"], {"n": n}) for n in range(1, 11)]
            pending = asyncio.gather(*rest)
            await asyncio.sleep(0)  # every one of them has queued its publish
            await control.execute_command("CLIENT", "UNPAUSE")
            await asyncio.wait_for(asyncio.gather(first, pending), WAIT)
            opened = await asyncio.to_thread(publisher_connections, redis_url.url)
            heard = [(name, event["n"]) for name, event in [await next_published(elsewhere) for _ in range(22)]]
            await elsewhere.aclose()  # type: ignore[attr-defined]
            await control.aclose()  # type: ignore[attr-defined]
            return heard, opened

        heard, opened = asyncio.run(scenario())
        assert opened == 1, f"{opened} connections for 11 doorbells rung at once"
        rung = [(teambus.channel(group), n) for n in range(11) for group in ("team.1", "team.all")]
        assert heard == rung

    def test_a_publish_redis_does_not_take_fails_every_doorbell_waiting_and_the_next_tries_again(
        self, redis_url: Any
    ) -> None:
        async def scenario() -> tuple[list[BaseException | None], tuple[str, int]]:
            await asyncio.to_thread(redis_url.stop)
            outcomes = await asyncio.wait_for(
                asyncio.gather(
                    *(teambus.publish_elsewhere(["team.1"], {"n": n}) for n in range(3)), return_exceptions=True
                ),
                WAIT,
            )
            await asyncio.to_thread(redis_url.start)
            elsewhere = redis.asyncio.Redis.from_url(redis_url.url).pubsub()
            await elsewhere.subscribe(teambus.channel("team.1"))
            await teambus.publish_elsewhere(["team.1"], {"n": 3})
            name, event = await next_published(elsewhere)
            await elsewhere.aclose()  # type: ignore[attr-defined]
            return outcomes, (name, event["n"])

        outcomes, after = asyncio.run(scenario())
        assert all(isinstance(outcome, redis.ConnectionError) for outcome in outcomes), outcomes
        assert after == (teambus.channel("team.1"), 3)


class FromAThreadTests:
    def test_doorbells_rung_without_a_loop_share_one_connection(self, redis_url: Any) -> None:
        """A management command or the sweeper rings from plain threads: no socket per doorbell."""
        with team_listener("team.1") as listener:
            before = len(os.listdir("/proc/self/fd"))
            for n in range(50):
                events.send(["team.1"], {"type": "request.created", "request_id": str(n)})
            opened = len(os.listdir("/proc/self/fd")) - before
            heard = [listener.next()[1]["request_id"] for _ in range(50)]
        assert heard == [str(n) for n in range(50)]
        assert opened <= 2, f"{opened} descriptors opened for 50 doorbells"


class InProcessBusTests:
    @override_settings(REDIS_URL="")
    def test_without_redis_the_process_hears_its_own_doorbells(self) -> None:
        async def scenario() -> tuple[str, dict[str, Any]]:
            heard = Heard()
            subscription = heard.subscribe()
            await subscription.add("team.7")
            await teambus.publish("team.8", {"type": "request.created", "request_id": "other team"})
            # Rung from a thread's own loop, as a management command's doorbell is.
            await asyncio.to_thread(asyncio.run, teambus.publish("team.7", {"type": "request.created"}))
            got = await heard.next()
            await subscription.close()
            return got

        assert asyncio.run(scenario()) == ("team.7", {"type": "request.created"})
