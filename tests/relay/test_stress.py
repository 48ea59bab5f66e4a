"""Stress: many asks, each raced by five deciders on two server processes → one decision each.

`GATEHOUSE_STRESS_ASKS` sets the number of asks (default 200, which keeps a run near a
minute on two cores; the issue's 1,000 is `GATEHOUSE_STRESS_ASKS=1000`).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from approvals import services
from approvals.models import Decision, PermissionRequest
from tests.live import LiveServer, live_server
from tests.relay.redis_server import PrivateRedis, private_redis
from tests.relay.wsclient import agent_connect, receive, send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ASKS = int(os.environ.get("GATEHOUSE_STRESS_ASKS", "200"))
PER_SOCKET = 50
DECIDERS = 5
# One agent holds every ask and socket here, by design: lift its limits to the run's size.
LIMITS: dict[str, Any] = {
    "GATEHOUSE_MAX_PENDING_PER_AGENT": str(ASKS + 1),
    "GATEHOUSE_MAX_AGENT_SOCKETS": str(ASKS // PER_SOCKET + 1),
}


@dataclass
class Tally:
    ids: dict[str, str] = field(default_factory=dict)  # request id -> ref
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)  # ref -> decision frame
    doubles: int = 0
    reconnects: int = 0
    wins: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    all_pending: asyncio.Event = field(default_factory=asyncio.Event)


async def _connect(srv: LiveServer, token: str) -> Any:
    for attempt in range(40):
        try:
            return await agent_connect(srv, token)
        except (OSError, ConnectionClosed, TimeoutError):
            await asyncio.sleep(min(0.05 * 2**attempt, 1.0))  # reconnect backoff, as a real agent would
    raise AssertionError("could not reconnect")


async def agent(srv: LiveServer, token: str, index: int, tally: Tally) -> None:
    """One agent socket: submit its asks, then collect every decision, resuming after drops."""
    refs = [f"s{index}-{n}" for n in range(PER_SOCKET)]
    ws = await _connect(srv, token)
    for ref in refs:
        call = {"tool_name": "Bash", "tool_input": {"command": f"rm -rf {ref}"}, "tool_use_id": ref, "cwd": "/w"}
        await send(ws, {"type": "permission_request", "ref": ref, "request": call})
    mine: dict[str, str] = {}
    while not all(ref in tally.decisions for ref in refs):
        try:
            frame = await receive(ws, timeout=60)
        except ConnectionClosed:
            tally.reconnects += 1
            ws = await _connect(srv, token)
            open_ids = [{"id": i, "ref": r} for i, r in mine.items() if r not in tally.decisions]
            await send(ws, {"type": "resume", "ids": open_ids})
            continue
        if frame["type"] == "pending":
            mine[frame["id"]] = frame["ref"]
            tally.ids[frame["id"]] = frame["ref"]
            if len(tally.ids) == ASKS:
                tally.all_pending.set()
        elif frame["type"] == "decision":
            if frame["ref"] in tally.decisions:
                tally.doubles += 1
            tally.decisions[frame["ref"]] = frame
        else:
            raise AssertionError(f"unexpected frame {frame}")
    await ws.close()


async def decide_all(servers: list[LiveServer], token: str, tally: Tally, midway: Any) -> None:
    clients = [
        httpx.AsyncClient(base_url=s.url, timeout=30, headers={"Authorization": f"Bearer {token}"}) for s in servers
    ]
    gate = asyncio.Semaphore(10)

    async def one(request_id: str, n: int) -> None:
        async with gate:
            client = clients[n % len(clients)]
            response = await client.post(
                f"/api/v1/permission-requests/{request_id}/decision",
                json={"behavior": random.choice(["allow", "deny"])},
            )
            tally.statuses[response.status_code] += 1
            if response.status_code == 200:
                tally.wins[request_id] += 1

    try:
        ids = list(tally.ids)
        half = len(ids) // 3
        await asyncio.gather(*(one(i, n) for i in ids[:half] for n in range(DECIDERS)))
        await midway()
        await asyncio.gather(*(one(i, n) for i in ids[half:] for n in range(DECIDERS)))
    finally:
        for client in clients:
            await client.aclose()


def run_stress(servers: list[LiveServer], agent_token: str, person_token: str, midway: Any) -> Tally:
    tally = Tally()

    async def scenario() -> None:
        sockets = [
            asyncio.create_task(agent(servers[i % len(servers)], agent_token, i, tally))
            for i in range(ASKS // PER_SOCKET)
        ]
        await asyncio.wait_for(tally.all_pending.wait(), 120)
        await decide_all(servers, person_token, tally, midway)
        await asyncio.wait_for(asyncio.gather(*sockets), 120)

    asyncio.run(scenario())
    return tally


def check(tally: Tally) -> None:
    assert len(tally.ids) == ASKS
    assert len(tally.decisions) == ASKS, "some agent was never answered"
    assert tally.doubles == 0
    assert all(tally.wins[i] == 1 for i in tally.ids), "a request had no winner or two"
    assert tally.statuses[200] == ASKS
    assert tally.statuses[409] == ASKS * (DECIDERS - 1), tally.statuses
    assert Decision.objects.count() == ASKS
    assert not PermissionRequest.objects.filter(state="pending").exists()
    for request_id, ref in tally.ids.items():
        assert tally.decisions[ref]["id"] == request_id


class StressTests:
    def test_every_ask_is_decided_exactly_once_across_two_processes(self, ci_bot: Any, alice: Any) -> None:
        token = services.personal_token_create(user=alice)
        started = time.monotonic()
        with live_server(**LIMITS) as one, live_server(**LIMITS) as two:
            tally = run_stress([one, two], ci_bot.token, token, midway=lambda: asyncio.sleep(0))
        check(tally)
        print(f"{ASKS} asks x {DECIDERS} deciders on 2 processes: {time.monotonic() - started:.1f}s")

    def test_a_redis_restart_mid_run_loses_and_doubles_nothing(self, ci_bot: Any, alice: Any) -> None:
        token = services.personal_token_create(user=alice)
        with private_redis() as redis_server:
            started = time.monotonic()
            with (
                live_server(REDIS_URL=redis_server.url, **LIMITS) as one,
                live_server(REDIS_URL=redis_server.url, **LIMITS) as two,
            ):

                async def restart() -> None:
                    await asyncio.to_thread(PrivateRedis.restart, redis_server)

                tally = run_stress([one, two], ci_bot.token, token, midway=restart)
        check(tally)
        print(f"{ASKS} asks with a Redis restart: {time.monotonic() - started:.1f}s, {tally.reconnects} reconnects")
