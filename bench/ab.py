"""`python -m bench.ab OTHER`: this checkout's server against another checkout's, paired.

The machines this runs on change speed by a third from one minute to the next, so two
runs of figure 2 (`python -m bench --only 2`), one per checkout, cannot tell a change of
10% in a call's CPU. Here a server of each checkout runs at once, on one database and
Redis, each with the team's dashboards open, and they take turns: N auto-decided submits
and N authenticated no-ops to one, then the same to the other (which goes first
alternates by round), each server's CPU read from /proc around its own turns. The two
measurements of a round are seconds apart, so their difference survives the machine's
swings; the median of the rounds' differences is the answer.

- `OTHER`: a checkout of another revision (`git worktree add /tmp/base <rev>`), run with
  this checkout's Python; it must work on this checkout's database schema (this
  checkout's migrations are applied).
- Each server's dashboards hear the other's doorbells too (one team, one Redis), as two
  processes of one deployment do; each server's CPU is counted during its own turns only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import fig_http
from bench.env import ROOT, BenchEnv, Server
from bench.loadgen import run_load

SIDES = ("this", "other")


@dataclass
class Turns:
    """One server's measurements, one entry per round."""

    submit_cpu_ms: list[float] = field(default_factory=list)  # server CPU per auto-decided submit
    noop_cpu_ms: list[float] = field(default_factory=list)  # server CPU per authenticated no-op
    submit_p50_ms: list[float] = field(default_factory=list)


def paired(this: list[float], other: list[float]) -> dict[str, float]:
    """The medians of two paired series and the median of their rounds' differences (this - other)."""
    if not this or len(this) != len(other):
        raise ValueError("paired series need one value per round each, and at least one round")
    return {
        "this": statistics.median(this),
        "other": statistics.median(other),
        "difference": statistics.median(a - b for a, b in zip(this, other, strict=True)),
    }


def summary(turns: dict[str, Turns]) -> dict[str, dict[str, float]]:
    this, other = turns["this"], turns["other"]
    return {
        "server CPU per submit, ms": paired(this.submit_cpu_ms, other.submit_cpu_ms),
        "server CPU per no-op, ms": paired(this.noop_cpu_ms, other.noop_cpu_ms),
        "submit CPU / no-op CPU": paired(
            [s / n for s, n in zip(this.submit_cpu_ms, this.noop_cpu_ms, strict=True)],
            [s / n for s, n in zip(other.submit_cpu_ms, other.noop_cpu_ms, strict=True)],
        ),
        "submit p50, ms": paired(this.submit_p50_ms, other.submit_p50_ms),
    }


def _turn(server: Server, requests: dict[str, object], calls: int, into: Turns) -> None:
    for kind, check, cpu in (
        ("submit", fig_http._check_submit, into.submit_cpu_ms),
        ("health", fig_http._check_health, into.noop_cpu_ms),
    ):
        before = fig_http.cpu_seconds([server.process.pid])
        result = asyncio.run(run_load([server.port], 1, calls, requests[kind], check))  # type: ignore[arg-type]
        cpu.append(1000 * (fig_http.cpu_seconds([server.process.pid]) - before) / calls)
        if result.errors:
            raise RuntimeError(f"{kind} to the {server.kind} server failed: {result.errors[0]}")
        if kind == "submit":
            into.submit_p50_ms.append(1000 * statistics.median(result.samples))


def measure(env: BenchEnv, other: Path, rounds: int, calls: int, dashboards: int) -> dict[str, Turns]:
    servers = {"this": env.start_server("daphne"), "other": env.start_server("daphne", checkout=other)}
    turns = {side: Turns() for side in SIDES}
    sessions = env.fixtures["sessions"][:dashboards]
    requests = fig_http._requests(env.fixtures["agent_token"])
    with contextlib.ExitStack() as open_dashboards:
        for server in servers.values():
            if sessions:
                open_dashboards.enter_context(fig_http.dashboards_open(server.ws_url, server.url, sessions))
        for server in servers.values():  # warm: connections, caches, the first cards
            _turn(server, requests, max(calls // 4, 1), Turns())
        for n in range(rounds):
            for side in SIDES if n % 2 == 0 else reversed(SIDES):
                _turn(servers[side], requests, calls, turns[side])
            print(
                f"round {n + 1}/{rounds}: CPU per submit this {turns['this'].submit_cpu_ms[-1]:.2f} ms,"
                f" other {turns['other'].submit_cpu_ms[-1]:.2f} ms",
                file=sys.stderr,
            )
    return turns


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=400, help="submits (and no-ops) per server per round")
    parser.add_argument("--dashboards", type=int, default=20, help="dashboards open on each server")
    parser.add_argument("--json", type=Path, help="write every round's measurements here")
    args = parser.parse_args()
    other = args.other.resolve()
    if not (other / "gatehouse" / "serve.py").is_file():
        parser.error(f"{other} is not a Gatehouse checkout")
    if other == ROOT:
        print("comparing this checkout with itself: the differences are the method's noise", file=sys.stderr)
    env = BenchEnv(quick=True)
    try:
        env.start()
        turns = measure(env, other, args.rounds, args.calls, args.dashboards)
    finally:
        env.stop()
    result = summary(turns)
    print(f"\n{args.rounds} rounds of {args.calls} calls, {args.dashboards} dashboards open on each server")
    print(f"this: {ROOT}\nother: {other}\n")
    print("| median | this | other | this - other (median of the rounds) |\n|---|---|---|---|")
    for name, values in result.items():
        print(f"| {name} | {values['this']:.3f} | {values['other']:.3f} | {values['difference']:+.3f} |")
    if args.json:
        args.json.write_text(json.dumps({"summary": result, "rounds": {k: asdict(v) for k, v in turns.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
