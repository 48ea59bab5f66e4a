"""Deadlines: expire overdue pending requests, reading the database, in any process.

The deadline lives on the row (`deadline_at`), not in the memory of the process that
created the request, so a request still expires after that process died.
`manage.py run_sweeper` sweeps in a process of its own, beside the servers. A single
server process with nothing beside it (`make run`) sweeps inside itself instead
(`GATEHOUSE_INPROCESS_SWEEPER`, `InProcessSweeper`). Several sweepers at once are safe
because `request_expire` goes through the same fenced update as every decision.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from approvals import selectors, services

log = logging.getLogger(__name__)

_task: asyncio.Task[None] | None = None


def sweep_once(limit: int = 100) -> int:
    """Take due ladder steps, then expire overdue pending requests; return how many this call expired."""
    climb_ladder(limit)
    expired = 0
    for request in selectors.overdue_requests(limit):
        try:
            if services.request_expire(request=request).won:
                expired += 1
        except services.AuditUnavailable:
            # Left pending; the next sweep tries again (the agent is still waiting).
            log.error("could not record the expiry of %s; retrying next sweep", request.pk)
    if expired:
        log.info("sweeper expired %d overdue request(s)", expired)
    return expired


def climb_ladder(limit: int = 100) -> int:
    """Take every due reminder and escalation (each once, whichever sweeper gets there first)."""
    taken = 0
    for request, kind in selectors.ladder_steps_due(limit):
        try:
            if services.request_ladder_step(request=request, kind=kind) is not None:
                taken += 1
        except services.AuditUnavailable:
            log.error("could not record the %s of %s; retrying next sweep", kind, request.pk)
    return taken


async def sweep_forever(interval: float | None = None) -> None:
    interval = interval or settings.GATEHOUSE_SWEEP_INTERVAL
    sweep = database_sync_to_async(sweep_once, thread_sensitive=False)
    while True:
        try:
            # Keep sweeping while a backlog remains, then rest.
            while await sweep() >= 100:
                pass
        except asyncio.CancelledError:
            raise
        except Exception:  # a database blip must not end deadlines for this process
            log.exception("sweep failed; retrying in %ss", interval)
        await asyncio.sleep(interval)


def is_running() -> bool:
    return _task is not None and not _task.done()


def ensure_started() -> None:
    """Start this process's sweeper on the running event loop, once."""
    global _task
    if is_running():
        return
    _task = asyncio.get_running_loop().create_task(sweep_forever())


class InProcessSweeper:
    """ASGI wrapper that starts the sweeper on the server's loop with its first connection.

    Daphne implements no ASGI lifespan, so the first scope of any kind (HTTP or
    WebSocket) is the first moment this process's event loop is known to be running.
    """

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        ensure_started()
        return await self.application(scope, receive, send)
