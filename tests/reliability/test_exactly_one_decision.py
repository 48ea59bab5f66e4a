"""Exactly one decision, checked Jepsen-style: record a history, then check it against a model.

Several agents submit asks over their sockets; concurrent deciders race over HTTP
(`POST …/decision`) and a chat surface through `relay.race.answer`, agents withdraw
some requests at random, others are left to their short deadline; two dashboards
watch. Mid-run the private Redis (never the shared one) is restarted, flushed, or
frozen past the claim TTL. Every operation and what it returned goes into a history,
and the check afterwards is the model:

- each request ends with at most one decision, and exactly one audit row;
- at most one decider was told it won (200), and the audit row names that decider;
- every loser's 409 names the real winner;
- the agent heard exactly that decision (every decision frame for the id agrees);
- dashboards were told who won (every push names the real winner);
- the hash chain verifies.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Origin

from approvals import services
from approvals.audit import verify_chain
from approvals.models import Decision, PermissionRequest
from tests.live import LiveServer, live_server
from tests.relay.redis_server import PrivateRedis, private_redis
from tests.relay.wsclient import in_thread, session_cookie
from tests.reliability.faults import Freezer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

AGENTS = 3
ASKS_PER_AGENT = 12
CLAIM_TTL_MS = 800
ASK_TIMEOUT = 4
FAULTS = ["none", "redis_restart", "redis_flush", "redis_pause"]
SETTLE_TIMEOUT = 60.0


@dataclass
class History:
    """Every operation and its result, in the order they completed."""

    ops: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def add(self, **op: Any) -> None:
        op["t"] = round(time.monotonic() - self.started, 3)
        self.ops.append(op)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [op for op in self.ops if op["op"] == kind]


@pytest.fixture
def redis_and_server(django_db_blocker: Any) -> Iterator[tuple[PrivateRedis, LiveServer]]:
    with (
        private_redis() as redis_server,
        django_db_blocker.unblock(),
        live_server(
            REDIS_URL=redis_server.url,
            GATEHOUSE_CLAIM_TTL_MS=str(CLAIM_TTL_MS),
            GATEHOUSE_ASK_TIMEOUT=str(ASK_TIMEOUT),
            GATEHOUSE_SWEEP_INTERVAL="1",
        ) as srv,
    ):
        yield redis_server, srv


class Agent:
    """An agent as the SDK behaves: one socket; on a drop it reconnects, resumes what it
    waits for and resubmits what was never acknowledged (same `tool_use_id`)."""

    def __init__(self, name: str, token: str, history: History) -> None:
        self.name, self.token, self.history = name, token, history
        self.ids: dict[str, str] = {}  # ref -> request id
        self.bodies: dict[str, dict[str, Any]] = {}  # ref -> the call, until acknowledged
        self.pending: asyncio.Queue[str] = asyncio.Queue()
        self.ws: ClientConnection | None = None
        self.connected = asyncio.Event()

    async def run(self, srv: LiveServer, count: int, stop: asyncio.Event) -> None:
        link = asyncio.ensure_future(self.stay_connected(srv, stop))
        await asyncio.wait_for(self.connected.wait(), 30)
        for n in range(count):
            ref = f"{self.name}-{n}"
            body = {
                "tool_name": "Bash",
                "tool_input": {"command": f"rm -rf build/{n}"},
                "session_id": "jepsen",
                "cwd": "/srv/project",
                "tool_use_id": f"toolu_{uuid.uuid4().hex}",
            }
            self.bodies[ref] = body
            self.history.add(op="submit", agent=self.name, ref=ref)
            await self.send({"type": "permission_request", "ref": ref, "request": body})
            await asyncio.sleep(random.uniform(0.02, 0.12))
        await stop.wait()
        link.cancel()
        if self.ws is not None:
            await self.ws.close()

    async def send(self, frame: dict[str, Any]) -> None:
        # A frame lost with a dropped socket is sent again by the reconnect (resubmit/resume).
        if self.ws is not None:
            try:
                await self.ws.send(json.dumps(frame))
            except Exception:  # noqa: S110
                pass

    async def stay_connected(self, srv: LiveServer, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async with connect(
                    f"{srv.ws_url}/ws/agent/",
                    proxy=None,
                    open_timeout=30,
                    additional_headers={"Authorization": f"Bearer {self.token}"},
                ) as ws:
                    self.ws = ws
                    if self.connected.is_set():
                        self.history.add(op="agent_reconnected", agent=self.name)
                        await self.resume(ws)
                    self.connected.set()
                    await self.read(ws)
            except Exception as exc:
                self.history.add(op="agent_dropped", agent=self.name, error=repr(exc)[:200])
            self.ws = None
            await asyncio.sleep(0.2)  # reconnect backoff

    async def resume(self, ws: ClientConnection) -> None:
        ids = [{"id": request_id, "ref": ref} for ref, request_id in self.ids.items()]
        if ids:
            await ws.send(json.dumps({"type": "resume", "ids": ids}))
        for ref, body in list(self.bodies.items()):
            if ref not in self.ids:
                await ws.send(json.dumps({"type": "permission_request", "ref": ref, "request": body}))

    async def read(self, ws: ClientConnection) -> None:
        async for raw in ws:
            frame = json.loads(raw)
            if frame.get("type") == "pending":
                ref = str(frame["ref"])
                if ref not in self.ids:
                    self.ids[ref] = frame["id"]
                    self.history.add(op="pending", agent=self.name, ref=ref, id=frame["id"])
                    await self.pending.put(frame["id"])
            elif frame.get("type") == "decision":
                decision = frame.get("decision") or {}
                if frame.get("ref") is not None and frame.get("id"):
                    self.ids.setdefault(str(frame["ref"]), frame["id"])
                self.history.add(
                    op="agent_heard",
                    agent=self.name,
                    ref=frame.get("ref"),
                    id=frame.get("id"),
                    behavior=decision.get("behavior"),
                    decided_by=decision.get("decided_by"),
                    reason=(decision.get("reason") or {}).get("type"),
                )
            elif frame.get("type") == "error":
                self.history.add(op="agent_error", agent=self.name, frame=frame)

    async def cancel(self, request_id: str) -> None:
        self.history.add(op="cancel", agent=self.name, id=request_id)
        await self.send({"type": "cancel", "id": request_id})


async def decide(
    client: httpx.AsyncClient, srv: LiveServer, who: str, token: str, request_id: str, history: History
) -> None:
    behavior = random.choice(["allow", "deny"])
    try:
        response = await client.post(
            f"{srv.url}/api/v1/permission-requests/{request_id}/decision",
            json={"behavior": behavior},
            headers={"Authorization": f"Bearer {token}"},
        )
    except httpx.HTTPError as exc:
        history.add(op="decide", who=who, id=request_id, behavior=behavior, status=0, error=repr(exc))
        return
    body = response.json()
    decision = body.get("decision") or (body.get("request") or {}).get("decision") or {}
    error = body.get("error") or {}
    history.add(
        op="decide",
        who=who,
        id=request_id,
        behavior=behavior,
        status=response.status_code,
        told_decided_by=decision.get("decided_by") or error.get("decided_by"),
        told_behavior=decision.get("behavior"),
        message=error.get("message", ""),
    )


CHAT_DECIDER = "tg-dave"


def chat_answer(request_id: str, behavior: str) -> tuple[int, str | None, str | None]:
    """A chat surface answering through the relay's one door (as the Telegram bridge does).

    It runs in the test process, whose claim store is not the server's private Redis:
    two claim stores that disagree, so only the database fence keeps it to one decision.
    """
    from relay import race

    try:
        result = race.answer(
            request_id, services.Answer(behavior=behavior, surface="telegram", decided_by=CHAT_DECIDER)
        )
    except Exception as exc:  # recorded as a failed operation and judged by the model
        return 0, repr(exc), None
    decision = result.decision
    if result.won:
        return 200, None, None
    return 409, (decision.decided_by if decision else result.holder), (decision.behavior if decision else None)


async def decide_by_chat(request_id: str, history: History) -> None:
    behavior = random.choice(["allow", "deny"])
    status, told, told_behavior = await in_thread(chat_answer, request_id, behavior)
    history.add(
        op="decide",
        who=CHAT_DECIDER,
        id=request_id,
        behavior=behavior,
        status=status,
        told_decided_by=told,
        told_behavior=told_behavior,
        message="",
    )


async def dashboard(
    srv: LiveServer, name: str, cookie: str, history: History, ready: asyncio.Event, stop: asyncio.Event
) -> None:
    async with connect(
        f"{srv.ws_url}/ws/dashboard/",
        additional_headers={"Cookie": f"sessionid={cookie}"},
        origin=Origin(srv.url),
        proxy=None,
        open_timeout=30,
    ) as ws:
        await ws.send(json.dumps({"type": "subscribe"}))
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if frame.get("type") == "snapshot":
                ready.set()
                break

        async def read() -> None:
            async for raw in ws:
                frame = json.loads(raw)
                if frame.get("type") in ("request.decided", "request.cancelled", "request.expired"):
                    history.add(
                        op="dashboard_heard",
                        dashboard=name,
                        id=frame["id"],
                        type=frame["type"],
                        decided_by=frame.get("decided_by"),
                        behavior=frame.get("behavior"),
                    )

        reader = asyncio.ensure_future(read())
        await stop.wait()
        reader.cancel()


def inject(fault: str, redis_server: PrivateRedis, history: History) -> None:
    history.add(op="fault", fault=fault)
    if fault == "redis_restart":
        redis_server.restart()
    elif fault == "redis_flush":
        import redis

        redis.Redis.from_url(redis_server.url).flushall()
    elif fault == "redis_pause":
        assert redis_server.process is not None
        Freezer(redis_server.process.pid).freeze_for(CLAIM_TTL_MS / 1000 * 3)
    history.add(op="fault_injected", fault=fault)


async def deciders_loop(
    srv: LiveServer,
    agents: list[Agent],
    approvers: dict[str, str],
    history: History,
    redis_server: PrivateRedis,
    fault: str,
) -> None:
    """For each pending request: race 2-3 deciders, or cancel it, or leave it to its deadline."""
    total = AGENTS * ASKS_PER_AGENT
    seen = 0
    jobs: list[asyncio.Task[None]] = []
    by_agent = {a.name: a for a in agents}
    async with httpx.AsyncClient(timeout=30) as client:
        while seen < total:
            getters = {asyncio.ensure_future(a.pending.get()): a.name for a in agents}
            done, waiting = await asyncio.wait(getters, timeout=30, return_when=asyncio.FIRST_COMPLETED)
            for task in waiting:
                task.cancel()
            assert done, "no request became pending within 30 s"
            for task in done:
                request_id, owner = task.result(), getters[task]
                seen += 1
                if seen == total // 2 and fault != "none":
                    await asyncio.to_thread(inject, fault, redis_server, history)
                if seen % 7 == 3:
                    # Left to its deadline: every seventh, so every run has expiries to
                    # check (a 15 % roll left none in about one run in 350).
                    continue
                if random.random() < 0.18:
                    jobs.append(asyncio.ensure_future(by_agent[owner].cancel(request_id)))
                racers = random.sample(sorted(approvers), k=random.choice([2, 3]))
                jobs.extend(
                    asyncio.ensure_future(decide(client, srv, who, approvers[who], request_id, history))
                    for who in racers
                )
                if random.random() < 0.3:
                    jobs.append(asyncio.ensure_future(decide_by_chat(request_id, history)))
        await asyncio.gather(*jobs)


def server_endings(ids: set[str]) -> set[str]:
    """The requests the server ended itself (the chat decider's endings are not announced there)."""
    return {str(d.request_id) for d in Decision.objects.filter(request_id__in=ids).exclude(decided_by=CHAT_DECIDER)}


def settled(ids: set[str]) -> bool:
    return PermissionRequest.objects.filter(pk__in=ids, state="pending").count() == 0


def run_history(
    srv: LiveServer,
    redis_server: PrivateRedis,
    fault: str,
    tokens: dict[str, str],
    approvers: dict[str, str],
    cookies: dict[str, str],
) -> History:
    history = History()

    async def scenario() -> None:
        stop = asyncio.Event()
        readies = {name: asyncio.Event() for name in cookies}
        boards = [
            asyncio.ensure_future(dashboard(srv, name, cookie, history, readies[name], stop))
            for name, cookie in cookies.items()
        ]
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in readies.values())), 30)
        agents = [Agent(name, token, history) for name, token in tokens.items()]
        runs = [asyncio.ensure_future(a.run(srv, ASKS_PER_AGENT, stop)) for a in agents]
        await deciders_loop(srv, agents, approvers, history, redis_server, fault)
        ids = {op["id"] for op in history.of("pending")}
        # Wait (bounded) for the database to settle: deadlines pass, the sweeper expires.
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while not await in_thread(settled, ids):
            assert time.monotonic() < deadline, "requests still pending long after their deadline"
            await asyncio.sleep(0.25)
        # ...and for every agent to have heard every outcome (sockets recheck every 5 s).
        heard = lambda: {op["id"] for op in history.of("agent_heard")}  # noqa: E731
        while not ids <= heard():
            assert time.monotonic() < deadline + 20, f"agents never heard {sorted(ids - heard())}"
            await asyncio.sleep(0.25)
        # ...and, without faults, for the dashboards too: an agent hears from the event
        # itself, a dashboard only after its card is read and rendered. (check() reports
        # whatever they still miss when the wait runs out.)
        if fault == "none":
            endings = await in_thread(server_endings, ids)
            told = lambda name: {op["id"] for op in history.of("dashboard_heard") if op["dashboard"] == name}  # noqa: E731
            while any(endings - told(name) for name in cookies) and time.monotonic() < deadline + 20:
                await asyncio.sleep(0.25)
        await asyncio.sleep(0)  # let the dashboards drain what already arrived
        stop.set()
        await asyncio.gather(*runs, *boards, return_exceptions=True)

    asyncio.run(scenario())
    return history


def check(history: History, fault: str) -> list[str]:
    """The model. Returns every violation found (empty means the history is valid)."""
    problems: list[str] = []
    ids = {op["id"] for op in history.of("pending")}
    rows = {str(d.request_id): d for d in Decision.objects.filter(request_id__in=ids)}
    states = dict(PermissionRequest.objects.filter(pk__in=ids).values_list("pk", "state"))
    for request_id in ids:
        state = states[uuid.UUID(request_id)]
        row = rows.get(request_id)
        if state == "pending" or row is None:
            problems.append(f"{request_id}: state {state}, audit row {row}")
            continue
        winners = [op for op in history.of("decide") if op["id"] == request_id and op["status"] == 200]
        if len(winners) > 1:
            problems.append(f"{request_id}: {len(winners)} deciders were told they won")
        if winners and (row.decided_by != winners[0]["who"] or row.behavior != winners[0]["behavior"]):
            problems.append(f"{request_id}: winner {winners[0]} but audit says {row.decided_by} {row.behavior}")
        if winners and state != "decided":
            problems.append(f"{request_id}: a decider won but the request is {state}")
        for op in history.of("decide"):
            if op["id"] != request_id or op["status"] == 200:
                continue
            if op["status"] != 409:
                problems.append(f"{request_id}: decider got {op['status']}: {op}")
            elif op["told_decided_by"] and not str(op["told_decided_by"]).startswith(row.decided_by):
                problems.append(f"{request_id}: loser told {op['told_decided_by']!r}, winner {row.decided_by!r}")
        for op in history.of("agent_heard"):
            if op["id"] == request_id and (op["behavior"] != row.behavior or op["decided_by"] != row.decided_by):
                problems.append(
                    f"{request_id}: agent heard {op['behavior']} by {op['decided_by']}, "
                    f"audit says {row.behavior} by {row.decided_by}"
                )
        for op in history.of("dashboard_heard"):
            if op["id"] == request_id and op["decided_by"] != row.decided_by:
                problems.append(f"{request_id}: dashboard told {op['decided_by']}, winner {row.decided_by}")
    if fault == "none":
        # Without faults the doorbell rings every time: each dashboard heard every ending
        # the server made. (The chat decider runs in the test process, whose channel layer
        # is not the server's private Redis; its endings reach dashboards only on refetch.)
        by_server = {i for i in ids if rows.get(i) is not None and rows[i].decided_by != CHAT_DECIDER}
        for name in {op["dashboard"] for op in history.of("dashboard_heard")} | {"alice", "root"}:
            told = {op["id"] for op in history.of("dashboard_heard") if op["dashboard"] == name}
            if by_server - told:
                problems.append(f"dashboard {name} never heard of {len(by_server - told)} endings")
    breaks = list(verify_chain())
    if breaks:
        problems.append(f"hash chain broken: {breaks[:3]}")
    return problems


@pytest.mark.parametrize("fault", FAULTS)
class ExactlyOneDecisionTests:
    def test_it_keeps_a_valid_history_under_concurrent_deciders_and_redis_faults(
        self, fault: str, redis_and_server: tuple[PrivateRedis, LiveServer], alice: Any, admin: Any, default_team: Any
    ) -> None:
        redis_server, srv = redis_and_server
        random.seed(f"gatehouse-{fault}")
        carol = services.membership_set(
            user=type(alice).objects.create_user(username="carol", password="carol-password-1"),
            team=default_team,
            role="approver",
        ).user
        tokens = {f"agent{n}": services.agent_create(name=f"jepsen-{n}", team=default_team)[1] for n in range(AGENTS)}
        approvers = {u.username: services.personal_token_create(user=u) for u in (alice, admin, carol)}
        cookies = {"alice": session_cookie(alice), "root": session_cookie(admin)}

        history = run_history(srv, redis_server, fault, tokens, approvers, cookies)

        problems = check(history, fault)
        decides = history.of("decide")
        summary = {
            "requests": len(history.of("pending")),
            "decides": len(decides),
            "won": sum(op["status"] == 200 for op in decides),
            "lost": sum(op["status"] == 409 for op in decides),
            "cancels": len(history.of("cancel")),
            "expired": Decision.objects.filter(reason_type="timeout").count(),
            "chat_won": sum(op["status"] == 200 and op["who"] == CHAT_DECIDER for op in decides),
            "agent_reconnects": len(history.of("agent_reconnected")),
        }
        print("history summary", fault, summary)
        assert problems == [], "\n".join(problems[:40])
        assert summary["requests"] == AGENTS * ASKS_PER_AGENT
        assert summary["won"] > 0 and summary["lost"] > 0 and summary["expired"] > 0
