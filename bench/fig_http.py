"""Figures 2 and 3: an auto-decided request over HTTP beside the no-op endpoint, under
Daphne and under Uvicorn (the same ASGI app, the same database and Redis).

The measured call is `POST /api/v1/permission-requests` for `Bash(git status)`, which an
allow rule decides: engine, audit row (hash chain), denial state, announce. The baseline
is `GET /api/v1/health` on the same server process with the same bearer token.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from bench.loadgen import LoadResult, Sample, json_body, run_load
from bench.stats import Figure, Row, ratio, summary_ms

TITLE2 = "Auto-decided request over HTTP (Daphne)"
TITLE3 = "Server choice: Uvicorn vs Daphne"
BOTTLENECK = (
    "the database round trips: an auto-decided submit is 11 SQL statements (it was 16-17: "
    "rules are now cached per team behind a version row, denial state is written only on change, "
    "no savepoints) against 1 for the no-op, each one a hop to a worker thread and back; with "
    "the connection pool (now the default) a submit costs ~16 ms at c=1 and one process "
    "serves ~60 submits/s against ~180 no-ops/s; the engine is ~0.1 ms"
)
BOTTLENECK3 = (
    "neither server is the bottleneck: both spend their time in the same Django/database work, "
    "so the submit/no-op ratio misses its goal under both (see figure 2)"
)
LEVELS = (1, 16, 64)


def _requests(token: str) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def health(worker: int, n: int) -> tuple[str, str, dict[str, str], bytes]:
        return "GET", "/api/v1/health", auth, b""

    def submit(worker: int, n: int) -> tuple[str, str, dict[str, str], bytes]:
        body = {
            "tool_name": "Bash",
            "tool_input": {"command": "git status"},
            "tool_use_id": f"toolu_{uuid.uuid4().hex}",
            "session_id": f"bench-session-{worker}",
            "cwd": "/tmp/bench",
        }
        return "POST", "/api/v1/permission-requests", auth, json_body(body)

    return {"health": health, "submit": submit}


def _check_health(sample: Sample) -> str | None:
    return None if sample.status == 200 else f"health answered {sample.status}: {sample.body[:200]!r}"


def _check_submit(sample: Sample) -> str | None:
    if sample.status != 200:
        return f"submit answered {sample.status}: {sample.body[:200]!r}"
    decision = json.loads(sample.body).get("decision") or {}
    return None if decision.get("behavior") == "allow" else f"not auto-allowed: {sample.body[:200]!r}"


def measure_server(ports: list[int], token: str, per_connection: int, quick: bool) -> dict[str, Any]:
    """Each level: warm up, then health, submit, health, submit (interleaved against drift)."""
    factories = _requests(token)
    checks = {"health": _check_health, "submit": _check_submit}
    rounds = 1 if quick else 2  # interleaved health/submit rounds against drift
    per_level: dict[str, Any] = {}
    for level in LEVELS:
        # `per_connection` requests per connection (at least 75 at c=1 outside smoke runs).
        total = max(level, per_connection * level, 75 if per_connection > 1 else 0)
        asyncio.run(run_load(ports, level, level * 2, factories["submit"], _check_submit))  # warm-up
        merged: dict[str, LoadResult] = {"health": LoadResult(), "submit": LoadResult()}
        for _ in range(rounds):
            for name in ("health", "submit"):
                got = asyncio.run(run_load(ports, level, total, factories[name], checks[name]))
                merged[name].samples += got.samples
                merged[name].errors += got.errors
                merged[name].wall_s += got.wall_s
        per_level[str(level)] = {
            name: {
                **summary_ms(res.samples),
                "errors": len(res.errors),
                "first_errors": res.errors[:3],
                "throughput_per_s": round(res.throughput, 1),
            }
            for name, res in merged.items()
        }
    return per_level


def run(env: Any) -> list[Figure]:
    token = env.fixtures["agent_token"]
    results: dict[str, Any] = {}
    for kind in ("daphne", "uvicorn"):
        with env.server(kind) as server:
            results[kind] = measure_server([server.port], token, env.pick(1, 3, 12), env.quick or env.smoke)
    fig2 = Figure(2, TITLE2, details={"daphne": results["daphne"]})
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
                "<= 1.5x no-op",
                ratio(sub["p50_ms"], base["p50_ms"]) <= 1.5,
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
            )
        )
        fig2.rows.append(
            Row(
                f"c={level}: errors (submit + health)",
                sub["errors"] + base["errors"],
                "",
                None,
                "",
                None,
                "0",
                sub["errors"] + base["errors"] == 0,
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
                "<= 1.5x no-op",
                uvicorn_ratio <= 1.5,
            )
        )
    return [fig2, fig3]
