"""Wait for a request's outcome without holding a thread: the long-poll behind `?wait=`.

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
    while True:
        decision = await _current_decision(request_id)
        remaining = deadline - loop.time()
        if decision is not None or remaining <= 0:
            return decision
        step = min(remaining, RECHECK_SECONDS)
        try:
            if channel is None:
                await asyncio.sleep(step)  # no doorbell: poll the database at a bounded rate
            else:
                await asyncio.wait_for(layer.receive(channel), step)
        except TimeoutError:
            continue
        except Exception:
            log.warning("channel layer receive failed; polling %s", request_id, exc_info=True)
            channel = None
