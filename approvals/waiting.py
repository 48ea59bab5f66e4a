"""Wait for a request's outcome on the event loop: the long-poll behind `?wait=`.

Subscribe first, then read the database, then wait for the doorbell: a decision that
commits between the read and the subscribe is never missed, and one that arrives on
another server process reaches us through the channel layer.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from approvals import selectors
from approvals.events import request_group
from approvals.models import Decision, PermissionRequest

log = logging.getLogger(__name__)


@database_sync_to_async
def _current_decision(request_id: uuid.UUID | str) -> Decision | None:
    request = PermissionRequest.objects.filter(pk=request_id).first()
    return selectors.decision_for(request) if request is not None else None


# The channel layer delivers at most once; re-reading the database this often bounds how
# late a lost doorbell can make a waiter.
RECHECK_SECONDS = 2.0


async def wait_for_decision(request_id: uuid.UUID | str, timeout: float) -> Decision | None:
    """The request's decision, waiting up to `timeout` seconds; None if still pending."""
    layer = get_channel_layer()
    if timeout <= 0:
        return await _current_decision(request_id)
    channel: str | None = None
    group = request_group(request_id)
    if layer is not None:
        try:
            channel = await layer.new_channel("wait.")
            await layer.group_add(group, channel)
        except Exception:  # channel layer down: fall back to reading the database
            log.warning("channel layer unavailable; polling %s", request_id, exc_info=True)
            channel = None
    try:
        return await _wait(layer, channel, request_id, timeout)
    finally:
        if layer is not None and channel is not None:
            try:
                await layer.group_discard(group, channel)
            except Exception:  # a Redis blip here must not turn a decision into an error
                log.warning("could not leave %s", group, exc_info=True)


async def _wait(layer: Any, channel: str | None, request_id: uuid.UUID | str, timeout: float) -> Decision | None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    # One receive at a time, never cancelled while we wait: `wait_for` would cancel it
    # each recheck and then wait for the cancel to finish, and a channel-layer receive
    # that does not give up promptly (seen with channels-redis when the doorbell never
    # rings: the decider died between its commit and its announcement) held the agent's
    # answer forever although the database had it.
    doorbell: asyncio.Future[Any] | None = None
    try:
        while True:
            decision = await _current_decision(request_id)
            remaining = deadline - loop.time()
            if decision is not None or remaining <= 0:
                return decision
            step = min(remaining, RECHECK_SECONDS)
            if channel is None:
                await asyncio.sleep(step)  # no doorbell: poll the database at a bounded rate
                continue
            if doorbell is None:
                doorbell = asyncio.ensure_future(layer.receive(channel))
            done, _ = await asyncio.wait({doorbell}, timeout=step)
            if doorbell in done:
                failure = doorbell.exception()
                doorbell = None
                if failure is not None:
                    log.warning("channel layer receive failed; polling %s", request_id, exc_info=failure)
                    channel = None
    finally:
        if doorbell is not None and channel is not None:
            _abandon(layer, channel, doorbell)


# Tasks started here and not awaited by anyone: asyncio keeps only weak references.
_abandoned: set[asyncio.Future[Any]] = set()
ABANDON_GRACE_SECONDS = 1.0


def _abandon(layer: Any, channel: str, doorbell: asyncio.Future[Any]) -> None:
    """Stop a receive we no longer need, without waiting for it to stop.

    Should the receive ignore the cancel, a message on its own channel ends it after a
    grace period, so no abandoned receive outlives its request for long.
    """
    doorbell.cancel()
    _abandoned.add(doorbell)
    doorbell.add_done_callback(_abandoned.discard)

    async def ring() -> None:
        try:
            await layer.send(channel, {"type": "request.abandoned"})
        except Exception:  # the channel expires by itself
            log.debug("could not wake the abandoned receive on %s", channel, exc_info=True)

    def check() -> None:
        if not doorbell.done():
            log.warning("a channel-layer receive ignored its cancel; waking it on %s", channel)
            wake = asyncio.ensure_future(ring())
            _abandoned.add(wake)
            wake.add_done_callback(_abandoned.discard)

    asyncio.get_running_loop().call_later(ABANDON_GRACE_SECONDS, check)
