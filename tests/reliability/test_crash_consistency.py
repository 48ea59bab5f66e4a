"""Crash consistency: SIGKILL the server at random moments with requests pending and in flight.

Each round starts a real Daphne, lets agents submit asks (HTTP and WebSocket) while
approvers race to decide them, and kills the process with SIGKILL at a random moment —
mid-claim, mid-commit or mid-push, whichever the timing hits. A fresh process then
takes over the same database and Redis. Afterwards:

- no request is lost: each one an agent was told about is still pending or ended, and
  the pending ones end by the new process's sweeper (reason timeout);
- every decision anybody saw (a decider's 200, an agent's frame) has exactly one audit
  row that says the same thing;
- an agent that reconnects and resumes hears the outcome of everything it waited for;
- a dashboard that reconnects gets a snapshot of exactly the requests still pending;
- the hash chain verifies.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.typing import Origin

from approvals import services
from approvals.audit import verify_chain
from approvals.models import Decision, PermissionRequest
from tests.live import LiveServer, live_server
from tests.relay.wsclient import session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROUNDS = 3
ASKS = 16
ASK_TIMEOUT = 5


def server() -> Any:
    return live_server(GATEHOUSE_ASK_TIMEOUT=str(ASK_TIMEOUT), GATEHOUSE_SWEEP_INTERVAL="1")


def ask(n: str) -> dict[str, Any]:
    return {
        "tool_name": "Bash",
        "tool_input": {"command": f"rm -rf build/{n}"},
        "session_id": "crash",
        "cwd": "/srv/project",
        "tool_use_id": f"toolu_crash_{n}",
    }


async def submit_and_race(
    srv: LiveServer,
    agent_token: str,
    approver_token: str,
    round_no: int,
    seen: list[dict[str, Any]],
    ids: dict[str, str],
) -> dict[str, str]:
    """Submit asks (half HTTP, half socket) into `ids`, race decisions on them, until the server dies."""
    agent_auth = {"Authorization": f"Bearer {agent_token}"}
    async with httpx.AsyncClient(timeout=10) as client:
        try:
            ws = await connect(f"{srv.ws_url}/ws/agent/", additional_headers=agent_auth, proxy=None)
        except OSError:
            return ids

        async def read() -> None:
            try:
                async for raw in ws:
                    frame = json.loads(raw)
                    if frame.get("type") == "pending":
                        ids[frame["id"]] = "ws"
                    elif frame.get("type") == "decision" and frame.get("id"):
                        seen.append({"by": "agent", "id": frame["id"], "behavior": frame["decision"]["behavior"]})
            except Exception:
                return

        reader = asyncio.ensure_future(read())

        async def decide(request_id: str) -> None:
            behavior = random.choice(["allow", "deny"])
            try:
                response = await client.post(
                    f"{srv.url}/api/v1/permission-requests/{request_id}/decision",
                    json={"behavior": behavior},
                    headers={"Authorization": f"Bearer {approver_token}"},
                )
            except httpx.HTTPError:
                return
            if response.status_code == 200:
                seen.append({"by": "decider", "id": request_id, "behavior": response.json()["decision"]["behavior"]})

        jobs = []
        try:
            for n in range(ASKS):
                key = f"{round_no}-{n}"
                if n % 2:
                    await ws.send(json.dumps({"type": "permission_request", "ref": key, "request": ask(key)}))
                else:
                    response = await client.post(
                        f"{srv.url}/api/v1/permission-requests", json=ask(key), headers=agent_auth
                    )
                    ids[response.json()["id"]] = "http"
                for request_id in [i for i in list(ids) if random.random() < 0.3]:
                    jobs.append(asyncio.ensure_future(decide(request_id)))
                await asyncio.sleep(random.uniform(0, 0.05))
        except Exception:  # noqa: S110  (the server was killed mid-loop: that is the test)
            pass
        await asyncio.gather(*jobs, return_exceptions=True)
        reader.cancel()
        await ws.close()
    return ids


async def killer(srv: LiveServer, ids: dict[str, str]) -> float:
    # Let the round get going (two requests known to the agent), however slow the machine.
    started = time.monotonic()
    while len(ids) < 2 and time.monotonic() - started < 30:
        await asyncio.sleep(0.01)
    delay = random.uniform(0, 1.3)
    await asyncio.sleep(delay)  # a random moment, not a wait for an event: the kill is the event
    await asyncio.to_thread(srv.kill)
    return delay


async def resume(srv: LiveServer, token: str, ids: list[str], timeout: float) -> dict[str, str]:
    """Reconnect as the agent, resume every id, and collect one outcome per id."""
    heard: dict[str, str] = {}
    async with connect(
        f"{srv.ws_url}/ws/agent/", additional_headers={"Authorization": f"Bearer {token}"}, proxy=None
    ) as ws:
        await ws.send(json.dumps({"type": "resume", "ids": ids}))
        deadline = time.monotonic() + timeout
        while set(ids) - set(heard):
            frame = json.loads(await asyncio.wait_for(ws.recv(), max(deadline - time.monotonic(), 0.1)))
            if frame.get("type") == "decision":
                heard[frame["id"]] = frame["decision"]["behavior"]
    return heard


async def dashboard_snapshot(srv: LiveServer, cookie: str) -> set[str]:
    async with connect(
        f"{srv.ws_url}/ws/dashboard/",
        additional_headers={"Cookie": f"sessionid={cookie}"},
        origin=Origin(srv.url),
        proxy=None,
    ) as ws:
        await ws.send(json.dumps({"type": "subscribe"}))
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 15))
            if frame.get("type") == "snapshot":
                return {item["id"] for item in frame["requests"]}


def pending_ids(ids: list[str]) -> set[str]:
    pending = PermissionRequest.objects.filter(pk__in=ids, state="pending")
    return {str(pk) for pk in pending.values_list("pk", flat=True)}


class CrashConsistencyTests:
    def test_it_loses_and_duplicates_nothing_when_the_server_is_killed_at_random_moments(
        self, django_db_blocker: Any, ci_bot: Any, alice: Any
    ) -> None:
        random.seed("gatehouse-crash")
        approver_token = services.personal_token_create(user=alice)
        cookie = session_cookie(alice)
        seen: list[dict[str, Any]] = []
        submitted: dict[str, str] = {}
        kills: list[float] = []
        for round_no in range(ROUNDS):
            with django_db_blocker.unblock(), server() as srv:

                async def one_round(srv: LiveServer = srv, round_no: int = round_no) -> None:
                    ids: dict[str, str] = {}  # request id -> how it was submitted
                    race = asyncio.ensure_future(
                        submit_and_race(srv, ci_bot.token, approver_token, round_no, seen, ids)
                    )
                    kills.append(await killer(srv, ids))
                    submitted.update(await race)

                asyncio.run(one_round())
                assert srv.process.returncode == -9

        assert len(submitted) >= ROUNDS * 2, "the kills came before anything was submitted"
        ids = sorted(submitted)
        # Every request an agent was told about survived the crash.
        assert PermissionRequest.objects.filter(pk__in=ids).count() == len(ids)

        with django_db_blocker.unblock(), server() as srv:
            still_pending = pending_ids(ids)
            snapshot = asyncio.run(dashboard_snapshot(srv, cookie))
            # The new process's sweeper may end an overdue request between the two reads;
            # anything missing from the snapshot must have finished in that gap.
            missing = still_pending - snapshot
            assert not missing & pending_ids(ids), "a reconnecting dashboard must see what is still pending"
            # The new process's sweeper ends what nobody decided; the agent hears all of it.
            heard = asyncio.run(resume(srv, ci_bot.token, ids, timeout=ASK_TIMEOUT + 30))

        rows = {str(d.request_id): d for d in Decision.objects.filter(request_id__in=ids)}
        assert set(heard) == set(ids)
        assert set(rows) == set(ids), "every request ends with exactly one audit row"
        assert {i: rows[i].behavior for i in ids} == heard, "the resumed agent hears what the audit says"
        for op in seen:
            assert rows[op["id"]].behavior == op["behavior"], f"{op} contradicts the audit row"
        for request_id in still_pending:
            assert rows[request_id].reason_type == "timeout"
        assert list(verify_chain()) == []
        print(
            f"crash rounds: killed after {[round(k, 2) for k in kills]} s; {len(ids)} requests, "
            f"{len(seen)} decisions seen before the kills, {len(still_pending)} expired after restart"
        )
