"""Figure 6: the claim race. Five racers per pending request call `services.request_decide`
at the same instant, each on a thread of an event loop as a server's threads call it; exactly
one may win. Beside it, the floor: a bare Redis `SET NX PX` from the same client plus one
database commit, one after the other.

The measurement runs in a fresh Django process (`python -m bench.fig_claims --out F`)
against the run's database and Redis; `run(env)` drives it and builds the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.stats import Figure, Row, ratio, summary_ms

TITLE = "Claim race: 5 racers per request"
BOTTLENECK = (
    "the winner's path, not the claim: the request's read, then one message on PostgreSQL (the "
    "fence, checked in the message; the chain's advisory lock; the audit row with its hash computed "
    "from the chain's head; its search text; the request naming it), which is its own transaction "
    "(1 round trip since 2026-12-06's thirteenth pass, 4 before, 8 before 2026-12-05), and the "
    "claim's SET NX and release; the floor is SET NX + one commit on an open connection. Losers "
    "block on the claim's release stream (XREAD) and read the row once; the five racers and the "
    "loop share one interpreter, so on a loaded machine each step waits its turn"
)
RACERS = 5


def _claim_store(registry: Any) -> str:
    """Use the relay's store as wired; install it if the wiring has not registered one yet."""
    if registry.claim_store is not None:
        return f"{type(registry.claim_store).__name__} (wired by relay)"
    try:
        from relay.claims import build_claim_store
    except ImportError:
        return "none (database fence only)"
    registry.claim_store = build_claim_store()
    return f"{type(registry.claim_store).__name__} (installed by the bench: relay.wiring registers none yet)"


def _floor(store: Any, agent_id: int, iterations: int) -> dict[str, Any]:
    """SET NX PX on the store's own client, then one committed UPDATE: the physical floor."""
    from django.db import transaction
    from django.utils import timezone

    from approvals.models import Agent

    client = getattr(store, "client", None)
    setnx, commit, both = [], [], []
    for i in range(iterations):
        key = f"{getattr(store, 'prefix', 'gh-bench')}:bench-floor:{i}"
        t0 = time.perf_counter()
        if client is not None:
            client.set(key, "x", nx=True, px=10_000)
        t1 = time.perf_counter()
        with transaction.atomic():
            Agent.objects.filter(pk=agent_id).update(last_seen_at=timezone.now())
        t2 = time.perf_counter()
        setnx.append(t1 - t0)
        commit.append(t2 - t1)
        both.append(t2 - t0)
        if client is not None:
            client.delete(key)
    return {"set_nx": summary_ms(setnx), "commit": summary_ms(commit), "set_nx_plus_commit": summary_ms(both)}


def _pending_requests(agent: Any, count: int) -> list[str]:
    from approvals import services

    ids = []
    for _ in range(count):
        result = services.request_submit(
            agent=agent,
            call={
                "tool_name": "Bash",
                "tool_input": {"command": "rm -rf build"},
                "tool_use_id": uuid.uuid4().hex,
                "session_id": "",
                "cwd": "/tmp/bench",
            },
        )
        if result.decision is not None:
            decision = result.decision
            raise RuntimeError(f"expected an ask, the engine decided {decision.behavior}: {decision.reason}")
        ids.append(str(result.request.pk))
    return ids


def _race(ids: list[str]) -> dict[str, Any]:
    """Each request's five racers at once, each on a thread of the process's event loop, as a
    server's request and socket threads call `request_decide`: what they announce is handed
    to the loop (`approvals.events.send`), not sent by the racer itself."""
    from asgiref.sync import sync_to_async
    from django.db import connection

    from approvals import events, services

    barrier = threading.Barrier(RACERS)
    samples: list[tuple[bool, float]] = []
    lock = threading.Lock()

    def racer(index: int, request_id: str) -> bool:
        barrier.wait()
        t0 = time.perf_counter()
        answer = services.Answer(behavior="allow", surface="bench", decided_by=f"racer-{index}")
        outcome = services.request_decide(request_id, answer)
        elapsed = time.perf_counter() - t0
        with lock:
            samples.append((outcome.won, elapsed))
        return outcome.won

    def close_connection(_: int) -> None:
        barrier.wait()
        connection.close()

    wins_per_request: list[int] = []

    async def race() -> None:
        with ThreadPoolExecutor(max_workers=RACERS) as pool:

            def on_pool(function: Any, *args: Any) -> Any:
                return sync_to_async(function, thread_sensitive=False, executor=pool)(*args)

            for request_id in ids:
                wins = await asyncio.gather(*(on_pool(racer, i, request_id) for i in range(RACERS)))
                wins_per_request.append(sum(wins))
            await asyncio.gather(*(on_pool(close_connection, i) for i in range(RACERS)))
        await events.DOORBELLS.idle()

    started = time.perf_counter()
    asyncio.run(race())
    wall = time.perf_counter() - started
    return {
        "wall_s": wall,
        "all": summary_ms([s for _, s in samples]),
        "winners": summary_ms([s for won, s in samples if won]),
        "losers": summary_ms([s for won, s in samples if not won]),
        "requests_without_exactly_one_winner": sum(1 for w in wins_per_request if w != 1),
    }


def worker(requests: int, floor_iterations: int) -> dict[str, Any]:
    import django

    django.setup()
    from django.db.models import Count

    from approvals.extensions import registry
    from approvals.models import Agent, Decision

    store_name = _claim_store(registry)
    agent = Agent.objects.get(name="bench-agent")
    floor = _floor(registry.claim_store, agent.pk, floor_iterations)
    ids = _pending_requests(agent, requests)
    race = _race(ids)
    doubles = Decision.objects.filter(request_id__in=ids).values("request_id").annotate(n=Count("id")).filter(n__gt=1)
    decided = Decision.objects.filter(request_id__in=ids).count()
    return {
        "claim_store": store_name,
        "requests": requests,
        "racers": RACERS,
        "floor": floor,
        "race": race,
        "claims_per_s": round(requests / race["wall_s"], 1),
        "double_decisions": doubles.count(),
        "audit_rows": decided,
    }


def run(env: Any) -> Figure:
    requests, floor_iterations = env.pick((3, 10), (30, 200), (300, 1000))
    data = env.django_json("bench.fig_claims", "--requests", str(requests), "--floor", str(floor_iterations))
    floor_p99 = data["floor"]["set_nx_plus_commit"]["p99_ms"]
    race = data["race"]
    figure = Figure(6, TITLE, details=data)
    figure.rows = [
        Row("claims per second (requests decided / s)", data["claims_per_s"], "/s"),
        Row(
            "racer p50 (request_decide, winners and losers)",
            race["all"]["p50_ms"],
            "ms",
            data["floor"]["set_nx_plus_commit"]["p50_ms"],
            "SET NX + commit p50",
            ratio(race["all"]["p50_ms"], data["floor"]["set_nx_plus_commit"]["p50_ms"]),
        ),
        Row(
            "racer p99",
            race["all"]["p99_ms"],
            "ms",
            floor_p99,
            "SET NX + commit p99",
            ratio(race["all"]["p99_ms"], floor_p99),
            "p99 <= 3x floor",
            race["all"]["p99_ms"] <= 3 * floor_p99,
        ),
        Row(
            "winner p99 (claim + fence + audit + announce)",
            race["winners"]["p99_ms"],
            "ms",
            floor_p99,
            "SET NX + commit p99",
            ratio(race["winners"]["p99_ms"], floor_p99),
        ),
        Row(
            "double decisions",
            data["double_decisions"],
            "",
            None,
            "",
            None,
            "0",
            data["double_decisions"] == 0
            and race["requests_without_exactly_one_winner"] == 0
            and data["audit_rows"] == data["requests"],
        ),
    ]
    return figure


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--floor", type=int, default=200)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    Path(args.out).write_text(json.dumps(worker(args.requests, args.floor)))


if __name__ == "__main__":
    main()
