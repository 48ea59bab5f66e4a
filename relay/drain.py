"""Draining: a server process about to stop tells its sockets to reconnect elsewhere.

Daphne stops by cancelling every connection; an agent would see its socket drop and
find out only by its own timeouts. `gatehouse.serve` calls `drain_sockets()` on
SIGTERM instead, after it stopped listening: every open socket gets a `reconnect` frame
and a 4012 ("service restart") close, and the agent reconnects (through the proxy, to
another process) and resumes. Nothing is decided or forgotten here: pending asks are
rows in the database, and `resume` re-attaches them on the new socket.
"""

from __future__ import annotations

import logging
from typing import Protocol

log = logging.getLogger(__name__)

# WebSocket's own 1012 ("service restart"), moved into the application range: Daphne
# (Autobahn) sends only 1000 and 3000-4999.
CLOSE_SERVICE_RESTART = 4012
RECONNECT_FRAME = {
    "type": "reconnect",
    "reason": "server_restarting",
    "message": "this server process is restarting; reconnect and resume",
}


class Drainable(Protocol):
    async def drain(self) -> None: ...


_sockets: set[Drainable] = set()
_draining = False


def register(socket: Drainable) -> None:
    _sockets.add(socket)


def unregister(socket: Drainable) -> None:
    _sockets.discard(socket)


def is_draining() -> bool:
    return _draining


def open_sockets() -> int:
    return len(_sockets)


async def drain_sockets() -> int:
    """Mark the process draining and ask every open socket to move; return how many."""
    global _draining
    _draining = True
    sockets = list(_sockets)
    for socket in sockets:
        try:
            await socket.drain()
        except Exception:  # one broken socket must not keep the others from moving
            log.warning("could not drain a socket", exc_info=True)
        unregister(socket)
    log.info("drained %d socket(s)", len(sockets))
    return len(sockets)
