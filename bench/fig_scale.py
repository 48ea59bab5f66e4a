"""Figure 7: scale. One server process with 1,000 agent sockets (1,000 distinct agents)
and 20 dashboards: memory per connection and push latency at 1,000 sockets vs at 10.
Then two server processes behind one Redis and one database: throughput of auto-decided
requests against two processes vs one, at the same client concurrency.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench import push
from bench.fig_http import _check_submit, _requests
from bench.loadgen import run_load
from bench.stats import Figure, Row, ratio, summary_ms

TITLE = "Scale: 1,000 agent sockets; two processes"
BOTTLENECK = (
    "sockets: an idle socket costs ~37 KiB and no database work; each p99 is the maximum of "
    "n=25 samples, and the swings of earlier runs (~5x, 7.5x, single samples of 130-210 ms at "
    "10 or 1,001 sockets) were the garbage collector's full passes over the loaded process "
    "(45-105 ms each), gone since 2026-12-05 (gc.freeze at start-up). Two processes share 2 "
    "cores with the load generator, PostgreSQL and Redis, and every decision serialises on the "
    "audit chain's lock: 1.1-1.7x one process's submits/s from run to run"
)
CONNECT_BATCH = 50
CONCURRENCY = 32


async def _open_agents(ws_url: str, tokens: list[str]) -> list[push.Socket]:
    sockets: list[push.Socket] = []
    for start in range(0, len(tokens), CONNECT_BATCH):
        batch = tokens[start : start + CONNECT_BATCH]
        sockets += await asyncio.gather(*(push.open_agent(ws_url, token) for token in batch))
    return sockets


async def sockets_scenario(server: Any, fixtures: dict[str, Any], samples: int) -> dict[str, Any]:
    agent = await push.open_agent(server.ws_url, fixtures["agent_token"])
    dashboards = [await push.open_dashboard(server.ws_url, server.url, s) for s in fixtures["sessions"]]
    idle_tokens = fixtures["socket_agent_tokens"]
    few = await _open_agents(server.ws_url, idle_tokens[:9])  # 10 agent sockets with `agent`
    async with push.approver_client(server.url, fixtures["approver_token"]) as http:
        await push.measure_push(agent, dashboards, http, 3)  # warm-up
        at_few = await push.measure_push(agent, dashboards, http, samples)
        rss_before = server.rss_kib()
        many = await _open_agents(server.ws_url, idle_tokens[9:])
        await asyncio.sleep(1.0)  # let the server finish the connects' work before reading its memory
        rss_after = server.rss_kib()
        at_many = await push.measure_push(agent, dashboards, http, samples)
    sockets = 1 + len(few) + len(many)
    for sock in [agent, *dashboards, *few, *many]:
        await sock.close()
    return {
        "agent_sockets": sockets,
        "dashboards": len(dashboards),
        "rss_before_mib": round(rss_before / 1024, 1),
        "rss_after_mib": round(rss_after / 1024, 1),
        "kib_per_socket": round((rss_after - rss_before) / max(1, len(many)), 1),
        "few": {
            "created": summary_ms(at_few.created),
            "decided": summary_ms(at_few.decided),
            "errors": at_few.errors[:3],
            "error_count": len(at_few.errors),
        },
        "many": {
            "created": summary_ms(at_many.created),
            "decided": summary_ms(at_many.decided),
            "errors": at_many.errors[:3],
            "error_count": len(at_many.errors),
        },
    }


def throughput(ports: list[int], token: str, total: int) -> dict[str, Any]:
    factory = _requests(token)["submit"]
    asyncio.run(run_load(ports, CONCURRENCY, CONCURRENCY * 2, factory, _check_submit))  # warm-up
    result = asyncio.run(run_load(ports, CONCURRENCY, total, factory, _check_submit))
    return {
        "per_s": round(result.throughput, 1),
        "errors": len(result.errors),
        "first_errors": result.errors[:3],
        **summary_ms(result.samples),
    }


def run(env: Any) -> Figure:
    samples, total = env.pick((2, 40), (5, 64), (25, 480))
    with env.server("daphne") as server:
        sockets = asyncio.run(sockets_scenario(server, env.fixtures, samples))
    token = env.fixtures["agent_token"]
    with env.server("daphne") as one:
        single = throughput([one.port], token, total)
    with env.server("daphne") as a, env.server("daphne") as b:
        double = throughput([a.port, b.port], token, total)
    figure = Figure(7, TITLE, details={"sockets": sockets, "one_process": single, "two_processes": double})
    n = sockets["agent_sockets"]
    few, many = sockets["few"], sockets["many"]
    figure.rows = [
        Row(f"memory per agent socket ({n} sockets + 20 dashboards)", sockets["kib_per_socket"], "KiB"),
        Row(
            f"server RSS with {n} sockets",
            sockets["rss_after_mib"],
            "MiB",
            sockets["rss_before_mib"],
            "RSS with 10 sockets",
            ratio(sockets["rss_after_mib"], sockets["rss_before_mib"]),
        ),
    ]
    for key, name in (("decided", "decision -> agent"), ("created", "submit -> request.created")):
        value, base = many[key]["p99_ms"], few[key]["p99_ms"]
        figure.rows.append(
            Row(
                f"{name} p99 at {n} sockets",
                value,
                "ms",
                base,
                "p99 at 10 sockets",
                ratio(value, base),
                "<= 1.2x",
                ratio(value, base) <= 1.2,
            )
        )
    figure.rows.append(
        Row(
            "lost pushes / errors",
            many["error_count"] + few["error_count"],
            "",
            None,
            "",
            None,
            "0",
            many["error_count"] + few["error_count"] == 0,
        )
    )
    scale = ratio(double["per_s"], single["per_s"])
    figure.rows.append(
        Row(
            f"two processes: auto-decided submits/s (c={CONCURRENCY})",
            double["per_s"],
            "/s",
            single["per_s"],
            "one process",
            scale,
            ">= 1.6x",
            scale >= 1.6,
        )
    )
    figure.rows.append(
        Row(
            "two processes: errors",
            double["errors"] + single["errors"],
            "",
            None,
            "",
            None,
            "0",
            double["errors"] + single["errors"] == 0,
        )
    )
    return figure
