"""Figures 2 and 3: an auto-decided request over HTTP beside the no-op endpoint, under
Daphne and under Uvicorn (the same ASGI app, the same database and Redis).

The measured call is `POST /api/v1/permission-requests` for `Bash(git status)`, which an
allow rule decides: engine, audit row (hash chain), denial state, announce. The baseline
is `GET /api/v1/health` on the same server process with the same bearer token, and the
floor `GET /healthz`, which the ASGI application answers before Django.

As the goal is stated, 20 dashboards of the team are open on the server throughout: each
auto-decided call reaches them as a decided card in their "recent" list.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import push
from bench.loadgen import LoadResult, Sample, json_body, run_load
from bench.stats import Figure, Row, ratio, summary_ms

TITLE2 = "Auto-decided request over HTTP (Daphne)"
TITLE3 = "Server choice: Uvicorn vs Daphne"
BOTTLENECK = (
    "the request cycle and its round trips, then the cards: without a dashboard open an "
    "auto-decided submit costs about 2.7-3x the no-op's CPU (DRF's request cycle, the thread "
    "crossing, 2 round trips: the token with the call's context (one since 2026-12-08's twenty-eighth "
    "pass), then the append's one message, which is its own transaction, since 2026-12-06's twelfth "
    "pass); with dashboards open each process "
    "reads and renders the cards of one tick's calls decided at submit (at most two ticks a second) together, on one "
    "worker thread in two statements, and hands them to each dashboard as one frame (20 "
    "dashboards added 2.2-3.2 ms per call before those reads were joined). The engine is ~0.1 ms "
    "(docs/PERFORMANCE.md, Issue 22)"
)
BOTTLENECK3 = (
    "neither server is the bottleneck: both spend their time in the same Django/database work, "
    "so the submit/no-op ratio misses its goal under both (see figure 2)"
)
LEVELS = (1, 16, 64)
# Issue 22: a call costs what a no-op costs.
P50_GOAL = 1.3  # submit p50 at most this many times the no-op's, at one connection
THROUGHPUT_GOAL = 0.7  # submits/s at least this share of no-ops/s, at 16 connections
CPU_GOAL = 2.0  # server CPU per submit at most this many times a no-op's
FLOOR_GOAL = 10.0  # ... and at most this many times a bare ASGI response's (the far goal)


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time the processes have used so far, all threads (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        # Fields after the parenthesised command name; utime and stime are the 14th and 15th.
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def _requests(token: str) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def health(worker: int, n: int) -> tuple[str, str, dict[str, str], bytes]:
        return "GET", "/api/v1/health", auth, b""

    def bare(worker: int, n: int) -> tuple[str, str, dict[str, str], bytes]:
        return "GET", "/healthz", {}, b""

    def submit(worker: int, n: int) -> tuple[str, str, dict[str, str], bytes]:
        body = {
            "tool_name": "Bash",
            "tool_input": {"command": "git status"},
            "tool_use_id": f"toolu_{uuid.uuid4().hex}",
            "session_id": f"bench-session-{worker}",
            "cwd": "/tmp/bench",
        }
        return "POST", "/api/v1/permission-requests", auth, json_body(body)

    return {"health": health, "bare": bare, "submit": submit}


def _check_health(sample: Sample) -> str | None:
    return None if sample.status == 200 else f"health answered {sample.status}: {sample.body[:200]!r}"


def _check_bare(sample: Sample) -> str | None:
    return None if sample.status == 200 else f"/healthz answered {sample.status}: {sample.body[:200]!r}"


@dataclass
class Seen:
    """What the dashboards read: frames, each socket's decided cards' ids, and how many
    times a socket went without the newest card when a wait for it gave up
    (`newest_arrived`)."""

    frames: int = 0
    missing: int = 0
    ids: list[set[str]] = field(default_factory=list)


@contextlib.contextmanager
def dashboards_open(ws_url: str, http_url: str, sessions: list[str]) -> Iterator[Seen]:
    """The team's dashboards, open and reading on a thread of their own while the load runs."""
    counts = Seen(ids=[set() for _ in sessions])
    opened = threading.Event()
    failure: list[BaseException] = []
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def hold() -> None:
        sockets = []
        try:
            sockets = [await push.open_dashboard(ws_url, http_url, s) for s in sessions]
        except BaseException as exc:
            failure.append(exc)
        opened.set()

        async def drain(sock: push.Socket, ids: set[str]) -> None:
            while True:
                _, frame = await sock.frames.get()
                counts.frames += 1
                # Calls decided at submit come in batches, gathered per tick.
                for each in frame["frames"] if frame.get("type") == "batch" else [frame]:
                    if each.get("type") == "request.decided":
                        ids.add(str(each.get("id")))

        drains = [asyncio.ensure_future(drain(sock, ids)) for sock, ids in zip(sockets, counts.ids, strict=True)]
        await stop.wait()
        for task in drains:
            task.cancel()
        for sock in sockets:
            await sock.close()

    thread = threading.Thread(target=loop.run_until_complete, args=(hold(),), daemon=True)
    thread.start()
    if not opened.wait(120):
        raise TimeoutError("the dashboards did not open within 120 s")
    if failure:
        raise RuntimeError(f"a dashboard did not open: {failure[0]}")
    try:
        yield counts
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)


def newest_arrived(seen: Seen, port: int, token: str, timeout: float = 30.0) -> int:
    """Submit one more auto-decided call and wait until every dashboard has its card; the
    sockets still without it when the timeout passes are counted (`seen.missing`), and
    figure 2 reports them. Returns the calls submitted (1).

    - A dashboard is sent only the newest cards of each tick of calls decided at submit,
      the ones its page keeps (`relay.fanout.shown_of`), so a count of cards cannot say
      the pushes are done. The newest call's card is always sent, and a team's pushes
      keep their order: once a socket has it, it has had every push before it.
    """
    method, path, headers, body = _requests(token)["submit"](0, 0)
    response = httpx.request(method, f"http://127.0.0.1:{port}{path}", headers=headers, content=body, timeout=timeout)
    failure = _check_submit(Sample(0.0, response.status_code, response.content))
    if failure is not None:
        raise RuntimeError(f"the newest call failed: {failure}")
    newest = str(response.json()["id"])
    deadline = time.monotonic() + timeout
    while any(newest not in ids for ids in seen.ids) and time.monotonic() < deadline:
        threading.Event().wait(0.005)
    seen.missing += sum(newest not in ids for ids in seen.ids)
    return 1


def _check_submit(sample: Sample) -> str | None:
    if sample.status != 200:
        return f"submit answered {sample.status}: {sample.body[:200]!r}"
    decision = json.loads(sample.body).get("decision") or {}
    return None if decision.get("behavior") == "allow" else f"not auto-allowed: {sample.body[:200]!r}"


def measure_server(
    ports: list[int],
    token: str,
    per_connection: int,
    quick: bool,
    pids: list[int] | None = None,
    settle: Callable[[], int] | None = None,
) -> dict[str, Any]:
    """Each level: warm up, then health, submit, health, submit (interleaved against drift).

    - `pids`: the server processes, whose CPU time per answered call is reported too.
    - `settle()`: returns once the work the submits so far left behind is done (their
      cards on every dashboard), so its CPU counts to the submits and not to the next
      load: at 16 connections the dashboards' frames trail the answers. It answers how
      many calls it submitted itself, counted with the submits.
    """
    factories = _requests(token)
    checks = {"health": _check_health, "bare": _check_bare, "submit": _check_submit}
    rounds = 1 if quick else 2  # interleaved health/submit rounds against drift
    per_level: dict[str, Any] = {}
    for level in LEVELS:
        # `per_connection` requests per connection (at least 75 at c=1 outside smoke runs).
        total = max(level, per_connection * level, 75 if per_connection > 1 else 0)
        asyncio.run(run_load(ports, level, level * 2, factories["submit"], _check_submit))  # warm-up
        if settle is not None:
            settle()
        merged: dict[str, LoadResult] = {name: LoadResult() for name in checks}
        cpu = {name: 0.0 for name in checks}
        settled = 0  # the calls `settle` submitted while the CPU was counted
        for _ in range(rounds):
            for name in checks:
                cpu_before = cpu_seconds(pids or [])
                # The floor costs a fraction of a clock tick of CPU per call: more calls for it.
                count = total * 4 if name == "bare" else total
                got = asyncio.run(run_load(ports, level, count, factories[name], checks[name]))
                if name == "submit" and settle is not None:
                    settled += settle()
                cpu[name] += cpu_seconds(pids or []) - cpu_before
                merged[name].samples += got.samples
                merged[name].errors += got.errors
                merged[name].wall_s += got.wall_s
        per_level[str(level)] = {
            name: {
                **summary_ms(res.samples),
                "errors": len(res.errors),
                "first_errors": res.errors[:3],
                "throughput_per_s": round(res.throughput, 1),
                "server_cpu_ms": (
                    round(1000 * cpu[name] / max(1, len(res.samples) + (settled if name == "submit" else 0)), 2)
                    if pids
                    else None
                ),
            }
            for name, res in merged.items()
        }
    return per_level


def run(env: Any) -> list[Figure]:
    token = env.fixtures["agent_token"]
    results: dict[str, Any] = {}
    frames: dict[str, int] = {}
    missing: dict[str, int] = {}
    for kind in ("daphne", "uvicorn"):
        with (
            env.server(kind) as server,
            dashboards_open(server.ws_url, server.url, env.fixtures["sessions"]) as seen,
        ):
            results[kind] = measure_server(
                [server.port],
                token,
                env.pick(1, 3, 12),
                env.quick or env.smoke,
                pids=[server.process.pid],
                settle=lambda: newest_arrived(seen, server.port, token),
            )
        frames[kind] = seen.frames
        missing[kind] = seen.missing
    fig2 = Figure(
        2, TITLE2, details={"daphne": results["daphne"], "dashboard_frames": frames, "cards_missing": missing}
    )
    fig3 = Figure(3, TITLE3, details=results)
    for level in LEVELS:
        d = results["daphne"][str(level)]
        sub, base = d["submit"], d["health"]
        fig2.rows.append(
            Row(
                f"c={level}: submit p50",
                sub["p50_ms"],
                "ms",
                base["p50_ms"],
                "health p50",
                ratio(sub["p50_ms"], base["p50_ms"]),
                f"<= {P50_GOAL}x no-op" if level == 1 else "",
                ratio(sub["p50_ms"], base["p50_ms"]) <= P50_GOAL if level == 1 else None,
            )
        )
        fig2.rows.append(
            Row(
                f"c={level}: submit p99",
                sub["p99_ms"],
                "ms",
                base["p99_ms"],
                "health p99",
                ratio(sub["p99_ms"], base["p99_ms"]),
            )
        )
        fig2.rows.append(
            Row(
                f"c={level}: submit throughput",
                sub["throughput_per_s"],
                "/s",
                base["throughput_per_s"],
                "health /s",
                ratio(sub["throughput_per_s"], base["throughput_per_s"]),
                f">= {THROUGHPUT_GOAL}x no-op" if level == 16 else "",
                ratio(sub["throughput_per_s"], base["throughput_per_s"]) >= THROUGHPUT_GOAL if level == 16 else None,
            )
        )
        if sub.get("server_cpu_ms") is not None and level in (1, 16):
            cpu_ratio = ratio(sub["server_cpu_ms"], base["server_cpu_ms"])
            fig2.rows.append(
                Row(
                    f"c={level}: server CPU per submit",
                    sub["server_cpu_ms"],
                    "ms",
                    base["server_cpu_ms"],
                    "per health",
                    cpu_ratio,
                    f"<= {CPU_GOAL}x no-op" if level == 1 else "",
                    cpu_ratio <= CPU_GOAL if level == 1 else None,
                )
            )
            floor = d["bare"]["server_cpu_ms"]
            floor_ratio = ratio(sub["server_cpu_ms"], floor)
            fig2.rows.append(
                Row(
                    f"c={level}: server CPU per submit, against a bare ASGI response",
                    sub["server_cpu_ms"],
                    "ms",
                    floor,
                    "per /healthz, no Django",
                    floor_ratio,
                    f"<= {FLOOR_GOAL:g}x floor" if level == 1 else "",
                    floor_ratio <= FLOOR_GOAL if level == 1 else None,
                )
            )
        fig2.rows.append(
            Row(
                f"c={level}: errors (submit + health + /healthz)",
                sub["errors"] + base["errors"] + d["bare"]["errors"],
                "",
                None,
                "",
                None,
                "0",
                sub["errors"] + base["errors"] + d["bare"]["errors"] == 0,
            )
        )
        u = results["uvicorn"][str(level)]
        for name in ("submit", "health"):
            fig3.rows.append(
                Row(
                    f"c={level}: {name} p50 under Uvicorn",
                    u[name]["p50_ms"],
                    "ms",
                    d[name]["p50_ms"],
                    "Daphne",
                    ratio(u[name]["p50_ms"], d[name]["p50_ms"]),
                )
            )
        fig3.rows.append(
            Row(
                f"c={level}: submit throughput under Uvicorn",
                u["submit"]["throughput_per_s"],
                "/s",
                d["submit"]["throughput_per_s"],
                "Daphne",
                ratio(u["submit"]["throughput_per_s"], d["submit"]["throughput_per_s"]),
            )
        )
        uvicorn_ratio = ratio(u["submit"]["p50_ms"], u["health"]["p50_ms"])
        fig3.rows.append(
            Row(
                f"c={level}: submit p50 / no-op p50 under Uvicorn",
                uvicorn_ratio,
                "x",
                None,
                "",
                None,
                f"<= {P50_GOAL}x no-op" if level == 1 else "",
                uvicorn_ratio <= P50_GOAL if level == 1 else None,
            )
        )
    fig2.rows.append(
        Row(
            "dashboards without the newest call's card 30 s after a load (Daphne)",
            missing["daphne"],
            "",
            None,
            "",
            None,
            "0",
            missing["daphne"] == 0,
        )
    )
    return [fig2, fig3]
