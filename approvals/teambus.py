"""The teams' and agents' doorbells: Redis pub/sub between processes, in-process without Redis.

A team's dashboards hear its requests, and an agent's sockets its decisions, through
their process's one subscription (`relay.fanout.LocalGroups`). On the channel layer
(channels-redis) a group message is stored once per member channel and popped by the
receiver: one team doorbell cost ~13 Redis commands (the group's members and their
expiry, a Lua script, then the receiver's BZPOPMIN and its backup queue), each a round
trip and, on a small machine, a context switch. A PUBLISH is one command, and the
subscriber reads the message from the connection it holds open. The waiters' and
people's groups stay on the channel layer.

A process hears its own doorbells at once, without the round trip through Redis: each
is handed to the process's own subscriptions (`_LOCAL`) as it is rung, and published
marked with the process's `ORIGIN`, so the copy Redis sends back is dropped. Without
Redis there is one server process, and that hand-over is the whole bus.

A message is one doorbell (`wire`: the origin and the event) or, for the calls decided
at submit, the doorbells one process rang for a group within a tick (`wire_gathered`: the
origin and the events, in the order rung; `approvals.events.Doorbells`), which a
subscription hands over one by one.

Delivery is at most once, as on the channel layer: a subscription whose connection
breaks (Redis restarted, the network cut) reports it once (`lost`) and is dropped; the
fan-out then closes its sockets, and their pages reconnect, subscribe and refetch.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import redis
import redis.asyncio
from django.conf import settings
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

log = logging.getLogger(__name__)

BUS_GROUP_PREFIXES = ("team.", "agent.")
# A subscription not confirmed by Redis within this long fails (the socket that asked
# gets an error frame and retries).
SUBSCRIBE_TIMEOUT = 10.0
# An idle subscription PINGs Redis this often, so a connection that died without a
# word is found out.
HEALTH_CHECK_SECONDS = 15
# How long a publish waits for Redis before the doorbell counts as lost.
PUBLISH_TIMEOUT = 15.0

Deliver = Callable[[str, dict[str, Any]], None]
Lost = Callable[[BaseException], None]


def on_bus(group: str) -> bool:
    """Whether a group's doorbells ride this bus: the teams' (dashboards) and the agents' (their sockets)."""
    return group.startswith(BUS_GROUP_PREFIXES)


def channel(group: str) -> str:
    return f"{settings.GATEHOUSE_REDIS_PREFIX}:doorbell:{group}"


# This process's mark on the doorbells it publishes; its own subscriptions have heard
# them already, so they drop the copy Redis sends back.
ORIGIN = uuid.uuid4().hex


def wire(event: dict[str, Any], origin: str = ORIGIN) -> str:
    """A doorbell as published on Redis: the event and the process that rang it."""
    return json.dumps({"origin": origin, "event": event})


def wire_gathered(events: Sequence[dict[str, Any]], origin: str = ORIGIN) -> str:
    """Several doorbells of one group as one message (`publish_gathered`): the events in the order rung."""
    return json.dumps({"origin": origin, "events": list(events)})


def heard(data: bytes | str) -> tuple[str, list[dict[str, Any]]]:
    """The origin and events of a published message, one doorbell or gathered ones.

    - Raises ValueError (not JSON), TypeError or KeyError when it is not an origin with
      either an event or a non-empty list of them, each an object whose type is text:
      every handler goes by the type (a set lookup, a method's name), and a list there
      raised in the hand-over and cost the subscription and its sockets.
    """
    doorbell = json.loads(data)
    if not isinstance(doorbell, dict) or ("event" in doorbell) == ("events" in doorbell):
        raise TypeError("not an origin with an event or with events")
    origin = doorbell["origin"]
    events = doorbell["events"] if "events" in doorbell else [doorbell["event"]]
    if not isinstance(events, list) or not events:
        raise TypeError("the events are not a list of them")
    for event in events:
        if not isinstance(event, dict):
            raise TypeError("an event is not an object")
        if not isinstance(event.get("type"), str):
            raise TypeError("an event's type is not text")
    return origin, events


async def publish(group: str, event: dict[str, Any]) -> None:
    """Ring a bus group on every server process, from the server's event loop."""
    hear_here(group, event)
    await publish_elsewhere([group], event)


def hear_here(group: str, event: dict[str, Any]) -> None:
    """Hand a doorbell to this process's own subscriptions, now: the first half of `publish`."""
    _LOCAL.deliver(group, event)


async def publish_elsewhere(groups: Sequence[str], event: dict[str, Any]) -> None:
    """Publish one doorbell to bus groups of the other server processes: the second half of `publish`.

    - Encoded once for all its groups; sent by this loop's `Publisher` with the others
      rung meanwhile. Raises when Redis did not take it.
    """
    if not settings.REDIS_URL or not groups:
        return
    message = wire(event)
    await _publisher().publish([(channel(group), message) for group in groups])


async def publish_gathered(events_by_group: dict[str, list[dict[str, Any]]]) -> None:
    """Publish doorbells gathered per bus group to the other server processes: one message per group.

    - Their subscriptions hand the events over one by one, in the order listed: the same
      as had each been published alone (`publish_elsewhere`). Raises when Redis did not
      take them.
    """
    if not settings.REDIS_URL or not events_by_group:
        return
    await _publisher().publish([(channel(group), wire_gathered(events)) for group, events in events_by_group.items()])


def _publisher() -> Publisher:
    loop = asyncio.get_running_loop()
    publisher = _publishers.get(loop)
    if publisher is None:
        publisher = _publishers[loop] = Publisher(settings.REDIS_URL)
    return publisher


# The name the publishers' connections carry in Redis (`CLIENT LIST`).
PUBLISHER_NAME = "gatehouse-doorbells"


class Publisher:
    """One event loop's publishes, sent as pipelines on one connection: the doorbells rung
    while one pipeline is in flight go together in the next, one round trip for them all.

    Each PUBLISH on its own was a command, a reply to parse and, when several were rung
    at once (a doorbell's two team groups, a busy tick), a connection each from the pool.
    Redis runs a pipeline's commands in order, so doorbells keep the order they were rung
    in. A pipeline that fails fails each of its publishers, who log it; the next one
    tries afresh.
    """

    def __init__(self, url: str) -> None:
        self._client = redis.asyncio.Redis.from_url(url, socket_timeout=PUBLISH_TIMEOUT, client_name=PUBLISHER_NAME)
        self._waiting: list[tuple[list[tuple[str, str]], asyncio.Future[None]]] = []
        self._sender: asyncio.Task[None] | None = None

    async def publish(self, messages: list[tuple[str, str]]) -> None:
        """Publish these (channel, message) pairs, in order; return once Redis has them."""
        done = asyncio.get_running_loop().create_future()
        self._waiting.append((messages, done))
        if self._sender is None:
            self._sender = asyncio.ensure_future(self._send())
        await done

    async def _send(self) -> None:
        batch: list[tuple[list[tuple[str, str]], asyncio.Future[None]]] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    async with self._client.pipeline(transaction=False) as pipe:
                        for messages, _ in batch:
                            for name, message in messages:
                                pipe.publish(name, message)
                        await pipe.execute()
                except Exception as exc:
                    _settle(batch, exc)
                else:
                    _settle(batch, None)
        except BaseException as exc:  # cancelled with the loop: nobody waits forever
            _settle([*batch, *self._waiting], exc)
            self._waiting = []
            raise
        finally:
            self._sender = None


def _settle(batch: list[tuple[list[tuple[str, str]], asyncio.Future[None]]], error: BaseException | None) -> None:
    for _, done in batch:
        if done.done():  # its publisher was cancelled
            continue
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)


_publishers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Publisher] = weakref.WeakKeyDictionary()


def publish_now(group: str, event: dict[str, Any]) -> None:
    """The same from a thread with no event loop to ring on (a management command, the sweeper).

    A client per short-lived loop would keep its connection open after the loop is gone:
    one socket leaked per doorbell. This one client's pool is shared by the threads.
    """
    hear_here(group, event)
    if not settings.REDIS_URL:
        return
    _blocking_client(settings.REDIS_URL).publish(channel(group), wire(event))


@functools.cache
def _blocking_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=PUBLISH_TIMEOUT)


class Subscription(Protocol):
    async def add(self, group: str) -> None:
        """Return once the group's doorbells reach this subscription."""

    async def remove(self, group: str) -> None: ...

    async def close(self) -> None: ...


def subscribe(deliver: Deliver, lost: Lost) -> Subscription:
    """A subscription of this process: `deliver(group, event)` per doorbell, `lost(error)` once if it breaks."""
    if settings.REDIS_URL:
        return RedisSubscription(settings.REDIS_URL, deliver, lost)
    return _LOCAL.subscribe(deliver)


class RedisSubscription:
    def __init__(self, url: str, deliver: Deliver, lost: Lost) -> None:
        self._deliver, self._lost = deliver, lost
        # This process's own doorbells, heard as they are rung.
        self._local = _LOCAL.subscribe(deliver)
        # No retries: a reconnect would resubscribe quietly and hide the doorbells missed
        # meanwhile. A broken connection ends the subscription, and `lost` says so.
        self._client = redis.asyncio.Redis.from_url(
            url, retry=Retry(NoBackoff(), 0), health_check_interval=HEALTH_CHECK_SECONDS, socket_keepalive=True
        )
        self._pubsub = self._client.pubsub()
        self._groups: dict[str, str] = {}  # channel -> group
        self._confirmed: dict[str, asyncio.Future[None]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._closed = False
        # One command at a time: redis-py's PubSub opens its connection on the first
        # command, and two first commands at once would each open one.
        self._commands = asyncio.Lock()

    async def add(self, group: str) -> None:
        name = channel(group)
        self._groups[name] = group
        confirmed = self._confirmed[name] = asyncio.get_running_loop().create_future()
        try:
            async with self._commands:
                await self._pubsub.subscribe(name)
                if self._reader is None:
                    self._reader = asyncio.ensure_future(self._read())
            await asyncio.wait_for(asyncio.shield(confirmed), SUBSCRIBE_TIMEOUT)
        except BaseException:
            self._groups.pop(name, None)
            self._confirmed.pop(name, None)
            raise
        await self._local.add(group)

    async def remove(self, group: str) -> None:
        name = channel(group)
        self._groups.pop(name, None)
        await self._local.remove(group)
        async with self._commands:
            await self._pubsub.unsubscribe(name)

    async def close(self) -> None:
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
        await self._release()

    async def _release(self) -> None:
        await self._local.close()
        try:
            await self._pubsub.aclose()  # type: ignore[attr-defined]  # redis 5+ has it; the stubs predate it
            await self._client.aclose()  # type: ignore[attr-defined]
        except Exception:  # closing a connection that already broke
            log.debug("closing a team subscription", exc_info=True)

    async def _read(self) -> None:
        try:
            while True:
                message = await self._pubsub.get_message(timeout=HEALTH_CHECK_SECONDS)
                if message is not None:
                    self._handle(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._closed:
                return
            for confirmed in self._confirmed.values():
                if not confirmed.done():
                    confirmed.set_exception(exc)
            self._confirmed.clear()
            self._lost(exc)
            await self._release()

    def _handle(self, message: dict[str, Any]) -> None:
        channel = message["channel"].decode() if isinstance(message["channel"], bytes) else message["channel"]
        if message["type"] == "subscribe":
            confirmed = self._confirmed.pop(channel, None)
            if confirmed is not None and not confirmed.done():
                confirmed.set_result(None)
        elif message["type"] == "message" and channel in self._groups:
            try:
                origin, events = heard(message["data"])
            except (ValueError, TypeError, KeyError):
                log.warning("ignored a doorbell on %s that is not a JSON origin and event", channel)
                return
            if origin != ORIGIN:  # this process heard its own as they were rung
                group = self._groups[channel]
                for event in events:
                    self._deliver(group, event)


class LocalSubscription:
    """A subscription to this process's own doorbells (the whole bus without Redis)."""

    def __init__(self, bus: LocalBus, deliver: Deliver) -> None:
        self._bus, self._deliver = bus, deliver
        self._loop = asyncio.get_running_loop()
        self.groups: set[str] = set()

    async def add(self, group: str) -> None:
        self.groups.add(group)

    async def remove(self, group: str) -> None:
        self.groups.discard(group)

    async def close(self) -> None:
        self._bus.subscribers.discard(self)

    def hear(self, group: str, event: dict[str, Any]) -> None:
        if group not in self.groups:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._deliver(group, event)
        elif not self._loop.is_closed():  # rung from another thread's loop (a management command's)
            self._loop.call_soon_threadsafe(self._deliver, group, event)


class LocalBus:
    def __init__(self) -> None:
        self.subscribers: set[LocalSubscription] = set()

    def subscribe(self, deliver: Deliver) -> LocalSubscription:
        subscription = LocalSubscription(self, deliver)
        self.subscribers.add(subscription)
        return subscription

    def deliver(self, group: str, event: dict[str, Any]) -> None:
        for subscription in list(self.subscribers):
            subscription.hear(group, event)


_LOCAL = LocalBus()
