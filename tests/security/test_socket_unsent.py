"""A socket whose client never reads must not hold the server's memory without end.

The class: unsent data per socket. A dashboard (or agent) that stops reading while the
server keeps writing — cards pushed for every ask, answers to its frames — piled up in
Twisted's write buffer (125 → 315 MB in 40 s in the review). `gatehouse.serve` aborts a
socket whose unsent data passes GATEHOUSE_MAX_SOCKET_UNSENT_BYTES.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from approvals import services
from tests.live import live_server
from tests.relay.wsclient import ask_call, in_thread, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 1024 * 1024
CARD_COMMAND_BYTES = 40 * 1024  # a card of ~45 KB, under the 64 KiB stand-in limit


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(found.group(1)) / 1024 if found else 0.0


def flood_a_deaf_dashboard(srv: Any, cookie: str, agents: list[Any], asks: int) -> tuple[int, bool, float]:
    """Subscribe, stop reading, let `asks` big cards be pushed; then (frames read, closed, MB grown)."""

    async def scenario() -> tuple[int, bool, float]:
        headers = {"Cookie": f"sessionid={cookie}"}
        url = f"{srv.ws_url}/ws/dashboard/"
        # max_queue=1: the client library stops reading the TCP stream after one frame, as a
        # client that never calls recv() does.
        # ping_interval=None: a client that never reads never reads the server's pong either,
        # and the library's own keepalive would close the socket first on a slow machine.
        async with connect(
            url, additional_headers=headers, origin=Origin(srv.url), proxy=None, max_queue=1, ping_interval=None
        ) as ws:
            await ws.send('{"type": "subscribe"}')
            before = rss_mb(srv.process.pid)
            for n in range(asks):
                call = {**ask_call(f"printf {n} " + "x" * CARD_COMMAND_BYTES), "tool_use_id": f"deaf-{n}"}
                await in_thread(services.request_submit, agent=agents[n % len(agents)], call=call)
                if n % 10 == 9 and "aborted:" in srv.log():
                    break  # the server gave up on the socket: more cards would prove nothing more
            deadline = time.monotonic() + 30
            while "aborted:" not in srv.log() and time.monotonic() < deadline and LIMIT < 10**12:
                await asyncio.sleep(0.1)  # polling the server's log for the abort, with a deadline
            grown = rss_mb(srv.process.pid) - before
            frames, closed = 0, False
            try:
                while True:
                    await asyncio.wait_for(ws.recv(), 5)
                    frames += 1
            except ConnectionClosed:
                closed = True
            except TimeoutError:
                closed = False
            return frames, closed, grown

    return asyncio.run(scenario())


class UnsentLimitTests:
    def test_a_dashboard_that_never_reads_is_aborted_past_the_limit(self, ci_bot: Any, alice: Any) -> None:
        agents = [services.agent_create(name=f"deaf-{k}", team=ci_bot.agent.team)[0] for k in range(2)]
        # Daphne's keepalive also closes a client that never reads (it never answers a ping),
        # 20 + 30 s after it stops; on a loaded machine that came before the limit did. Here
        # the keepalive waits longer, so what closes the socket is the limit under test.
        keepalive = ("--ping-interval", "300", "--ping-timeout", "300")
        with live_server(server="serve", daphne_args=keepalive, GATEHOUSE_MAX_SOCKET_UNSENT_BYTES=str(LIMIT)) as srv:
            frames, closed, grown = flood_a_deaf_dashboard(srv, session_cookie(alice), agents, asks=300)
            log = srv.log()
        print(f"server RSS grew {grown:.1f} MB; the client read {frames} frames before the close")
        assert closed, "the server kept a socket whose client never read"
        assert re.search(r"websocket /ws/dashboard/ aborted: \d+ bytes unsent \(limit 1048576\)", log)
        assert frames < 300  # cards were lost to the abort, not all delivered

    def test_a_reading_dashboard_gets_every_card(self, ci_bot: Any, alice: Any) -> None:
        with live_server(server="serve", GATEHOUSE_MAX_SOCKET_UNSENT_BYTES=str(LIMIT)) as srv:
            cookie = session_cookie(alice)

            async def scenario() -> int:
                headers = {"Cookie": f"sessionid={cookie}"}
                async with connect(
                    f"{srv.ws_url}/ws/dashboard/", additional_headers=headers, origin=Origin(srv.url), proxy=None
                ) as ws:
                    await ws.send('{"type": "subscribe"}')
                    await asyncio.wait_for(ws.recv(), 15)
                    for n in range(40):
                        call = {**ask_call(f"printf {n} " + "x" * CARD_COMMAND_BYTES), "tool_use_id": f"read-{n}"}
                        await in_thread(services.request_submit, agent=ci_bot.agent, call=call)
                    got = 0
                    while got < 40:
                        if '"request.created"' in await asyncio.wait_for(ws.recv(), 15):
                            got += 1
                    return got

            assert asyncio.run(scenario()) == 40
            assert "aborted:" not in srv.log()
