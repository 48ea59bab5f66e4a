"""A server process that drains sends the client on at once: no backoff, nothing lost.

The client reaches Gatehouse through a relay standing in for the load balancer; when
the first process drains, the relay already points at the second, as a proxy would.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agent.client import GatehouseClient
from approvals import services
from tests.live import free_port, live_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

# Far longer than the test waits for the reconnect: only the drain's hint makes it quick.
BACKOFF = 20.0


class Balancer:
    """Forward each new TCP connection to `target`, which the test may switch."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", free_port()))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                return
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for end in (a, b):
                # shutdown, not just close: the other direction's thread is blocked in
                # recv on the same socket, and a bare close would never send the FIN.
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()


@contextmanager
def balancer(target: int) -> Iterator[Balancer]:
    relay = Balancer(target)
    try:
        yield relay
    finally:
        relay.server.close()


class ClientDrainTests:
    async def test_it_reconnects_at_once_and_hears_the_answer(
        self, redis_url: str, ci_bot: Any, alice: Any, django_db_blocker: Any
    ) -> None:
        with (
            django_db_blocker.unblock(),
            live_server(server="serve", REDIS_URL=redis_url) as first,
            live_server(server="serve", REDIS_URL=redis_url) as second,
            balancer(first.port) as relay,
        ):
            url = f"http://127.0.0.1:{relay.port}"
            async with GatehouseClient(url, ci_bot.token, backoff_initial=BACKOFF, backoff_max=BACKOFF) as client:
                handle = await client.submit({"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}})
                request_id = await asyncio.wait_for(handle.accepted(), 15)
                relay.target = second.port
                first.process.send_signal(signal.SIGTERM)
                for _ in range(100):  # 5 s, a quarter of the backoff
                    if client.reconnects:
                        break
                    await asyncio.sleep(0.05)
                assert client.reconnects == 1, "the client waited out its backoff"
                assert not handle.done  # the ask stayed pending through the move
                await sync_to_async(services.request_decide)(
                    request_id, services.Answer(behavior="deny", surface="api", user=alice)
                )
                decision = await asyncio.wait_for(handle.decision(), 15)
        assert decision.behavior == "deny" and decision.request_id == request_id
