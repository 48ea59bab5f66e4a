"""Hear the bus's doorbells (teams', agents') as a server process does.

One subscription (`approvals.teambus`) on a thread of its own.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from approvals import teambus

WAIT_SECONDS = 10.0


class TeamListener:
    def __init__(self) -> None:
        self.heard: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self.lost: list[BaseException] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.subscription: teambus.Subscription = self._run(self._subscribe())

    async def _subscribe(self) -> teambus.Subscription:
        return teambus.subscribe(lambda group, event: self.heard.put((group, event)), self.lost.append)

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(WAIT_SECONDS)

    def add(self, group: str) -> None:
        """Return once the group's doorbells reach this listener."""
        self._run(self.subscription.add(group))

    def next(self) -> tuple[str, dict[str, Any]]:
        """The next doorbell heard: (group, event); fails after WAIT_SECONDS."""
        return self.heard.get(timeout=WAIT_SECONDS)

    def close(self) -> None:
        self._run(self.subscription.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_SECONDS)
        self.loop.close()


@contextmanager
def team_listener(*groups: str) -> Iterator[TeamListener]:
    listener = TeamListener()
    try:
        for group in groups:
            listener.add(group)
        yield listener
    finally:
        listener.close()
