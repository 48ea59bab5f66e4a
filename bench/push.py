"""WebSocket clients for the push figures: agents, dashboards, the echo baseline.

Every socket has a reader task stamping each frame with its arrival time, so a latency
is "frame arrived" minus "the action that caused it was sent", on one clock.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

WAIT = 30.0  # seconds: a push that takes longer is lost, and counted as an error


@dataclass
class Socket:
    ws: ClientConnection
    frames: asyncio.Queue[tuple[float, dict[str, Any]]] = field(default_factory=asyncio.Queue)
    reader: asyncio.Task[None] | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # the connection is gone (see `close_code`)

    def start(self) -> None:
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                self.frames.put_nowait((time.perf_counter(), json.loads(message)))
        except Exception:  # closed: the waiter times out and reports it
            return
        finally:
            self.ended.set()

    @property
    def close_code(self) -> int | None:
        return self.ws.close_code

    async def send(self, frame: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(frame))

    async def wait_for(self, frame_type: str, **match: Any) -> tuple[float, dict[str, Any]]:
        """The first frame of this type (and these fields); others are skipped."""
        deadline = time.perf_counter() + WAIT
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"no {frame_type} {match} within {WAIT}s")
            stamp, frame = await asyncio.wait_for(self.frames.get(), remaining)
            if frame.get("type") == frame_type and all(frame.get(k) == v for k, v in match.items()):
                return stamp, frame
            if frame.get("type") == "error":
                raise RuntimeError(f"error frame: {frame}")

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
        await self.ws.close()


async def open_agent(ws_url: str, token: str) -> Socket:
    ws = await connect(
        f"{ws_url}/ws/agent/", additional_headers={"Authorization": f"Bearer {token}"}, max_size=2**22, open_timeout=60
    )
    sock = Socket(ws)
    sock.start()
    return sock


async def open_dashboard(ws_url: str, http_url: str, session: str) -> Socket:
    ws = await connect(
        f"{ws_url}/ws/dashboard/",
        additional_headers={"Cookie": f"sessionid={session}", "Origin": http_url},
        max_size=2**22,
        open_timeout=60,
    )
    sock = Socket(ws)
    sock.start()
    await sock.send({"type": "subscribe"})
    await sock.wait_for("snapshot")
    return sock


def ask_call() -> dict[str, Any]:
    """A call no rule covers: the engine answers ask and the request waits for a person."""
    return {
        "tool_name": "Bash",
        "tool_input": {"command": f"rm -rf build-{uuid.uuid4().hex[:8]}"},
        "tool_use_id": f"toolu_{uuid.uuid4().hex}",
        "session_id": "bench-push",
        "cwd": "/tmp/bench",
    }


async def submit_pending(agent: Socket) -> tuple[float, float, str]:
    """An ask: when it was sent, when the agent's own `pending` frame arrived, its id."""
    ref = uuid.uuid4().hex
    sent = time.perf_counter()
    await agent.send({"type": "permission_request", "ref": ref, "request": ask_call()})
    answered, frame = await agent.wait_for("pending", ref=ref)
    return sent, answered, str(frame["id"])


@dataclass
class PushSamples:
    created: list[float] = field(default_factory=list)  # submit -> request.created on each dashboard
    created_first: list[float] = field(default_factory=list)  # ... on the first dashboard to get it
    pending: list[float] = field(default_factory=list)  # submit -> the agent's own `pending` frame
    decided: list[float] = field(default_factory=list)  # decision POST sent -> decision frame at the agent
    decide_http: list[float] = field(default_factory=list)  # the decision POST's own response time
    errors: list[str] = field(default_factory=list)


async def measure_push(agent: Socket, dashboards: list[Socket], http: httpx.AsyncClient, samples: int) -> PushSamples:
    """One ask at a time: submit, wait for every dashboard's card, decide, wait for the agent."""
    out = PushSamples()
    for _ in range(samples):
        try:
            sent, answered, request_id = await submit_pending(agent)
            out.pending.append(answered - sent)
            arrivals = await asyncio.gather(*(d.wait_for("request.created", id=request_id) for d in dashboards))
            delays = [stamp - sent for stamp, _ in arrivals]
            out.created += delays
            out.created_first.append(min(delays))
            decided_at = time.perf_counter()
            response = await http.post(
                f"/api/v1/permission-requests/{request_id}/decision",
                json={"behavior": "allow", "message": "", "remember": "once"},
            )
            out.decide_http.append(time.perf_counter() - decided_at)
            if response.status_code != 200:
                out.errors.append(f"decision answered {response.status_code}: {response.text[:200]}")
                continue
            stamp, _ = await agent.wait_for("decision", id=request_id)
            out.decided.append(stamp - decided_at)
        except Exception as exc:
            out.errors.append(f"{type(exc).__name__}: {exc}"[:300])
    return out


async def echo_round_trips(ws_url: str, samples: int) -> list[float]:
    async with connect(f"{ws_url}/ws/bench-echo/", open_timeout=60) as ws:
        times = []
        for i in range(samples):
            t0 = time.perf_counter()
            await ws.send(json.dumps({"type": "echo", "n": i}))
            await ws.recv()
            times.append(time.perf_counter() - t0)
        return times


def approver_client(http_url: str, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=http_url, headers={"Authorization": f"Bearer {token}"}, timeout=WAIT)
