"""`python -m bench.ab OTHER`: this checkout's server against another checkout's, paired.

The machines this runs on change speed by a third from one minute to the next, so two
runs of figure 2 (`python -m bench --only 2`), one per checkout, cannot tell a change of
10% in a call's CPU. Here a server of each checkout runs at once, on one database and
Redis, each with the team's dashboards open, and they take turns: a round gives each
server N auto-decided submits and N authenticated no-ops at one connection, in slices,
the servers alternating slice by slice (which goes first alternates by round), each
server's CPU read from /proc around its own slices. What the machine's speed does within
a round falls on both servers alike, so the rounds' differences survive its swings; the
median of those differences is the answer.

- `OTHER`: a checkout of another revision (`git worktree add /tmp/base <rev>`), run with
  this checkout's Python; it must work on this checkout's database schema (this
  checkout's migrations are applied).
- PostgreSQL's CPU (all its processes, read around each slice: only one server is at work
  then) is counted to that slice's server, since a change can move work between them.
- Each server rings its doorbells under a Redis prefix of its own, so its dashboards
  get the cards of its own calls only; a slice of submits ends when they all have them,
  as in figure 2, so a call's CPU includes its cards.

`--push`: figure 5's latencies instead, paired ask by ask. Each server has an agent
socket and its dashboards open; the servers take turns (which goes first alternates),
each turn one ask as figure 5 makes it: sent, its card on every dashboard, the agent's
`pending`, a person's decision, the agent's `decision`. Each ask's latencies less the
other server's ask beside it give the differences whose median is the answer: a swing of
the machine's speed over seconds falls on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import fig_http, push
from bench.env import ROOT, BenchEnv, Server
from bench.loadgen import run_load
from bench.ports import free_port, wait_for_port

SIDES = ("this", "other")


@dataclass
class Turns:
    """One server's measurements, one entry per round."""

    submit_cpu_ms: list[float] = field(default_factory=list)  # server CPU per auto-decided submit
    noop_cpu_ms: list[float] = field(default_factory=list)  # server CPU per authenticated no-op
    submit_db_cpu_ms: list[float] = field(default_factory=list)  # PostgreSQL's CPU per submit
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
        "PostgreSQL CPU per submit, ms": paired(this.submit_db_cpu_ms, other.submit_db_cpu_ms),
        "server and PostgreSQL CPU per submit, ms": paired(
            [a + b for a, b in zip(this.submit_cpu_ms, this.submit_db_cpu_ms, strict=True)],
            [a + b for a, b in zip(other.submit_cpu_ms, other.submit_db_cpu_ms, strict=True)],
        ),
        "submit p50, ms": paired(this.submit_p50_ms, other.submit_p50_ms),
    }


def database_cpu_seconds() -> float:
    """User + system CPU time of every PostgreSQL process so far (0 on SQLite: none run).

    - A backend that ends between two readings takes its time with it: the servers' pools
      keep theirs open for the whole comparison.
    """
    total = 0.0
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):  # not a process, or one that ended meanwhile
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == "postgres":
                total += fig_http.cpu_seconds([int(entry.name)])
    return total


@dataclass
class Side:
    """One server under comparison, its dashboards' counter and the submits it has answered."""

    server: Server
    seen: fig_http.Seen | None  # its dashboards; None without
    token: str

    def load(self, request: Any, check: Any, calls: int, *, submits: bool) -> tuple[float, float, list[float], int]:
        """`calls` requests at one connection: the server's and PostgreSQL's CPU seconds they
        cost, their latencies, and how many calls that was.

        - `submits`: auto-decided calls, whose cards the server then hands to its dashboards;
          the CPU is read once they all have them, as figure 2 does (one more call, whose
          card comes last: `fig_http.newest_arrived`).
        """
        before, database_before = fig_http.cpu_seconds([self.server.process.pid]), database_cpu_seconds()
        result = asyncio.run(run_load([self.server.port], 1, calls, request, check))
        if result.errors:
            raise RuntimeError(f"a call to the {self.server.kind} server failed: {result.errors[0]}")
        if submits and self.seen is not None:
            calls += fig_http.newest_arrived(self.seen, self.server.port, self.token)
        spent = fig_http.cpu_seconds([self.server.process.pid]) - before
        return spent, database_cpu_seconds() - database_before, result.samples, calls


def _round(
    sides: dict[str, Side], requests: dict[str, Any], calls: int, slices: int, first: str
) -> dict[str, tuple[float, float, float, float]]:
    """One round: each server takes `calls` submits and `calls` no-ops, in `slices` turns each,
    the servers alternating turn by turn (`first` first), so a swing of the machine's
    speed within the round falls on both alike."""
    cpu = {side: {"submit": 0.0, "health": 0.0, "database": 0.0} for side in SIDES}
    submitted = dict.fromkeys(SIDES, 0)
    latencies: dict[str, list[float]] = {side: [] for side in SIDES}
    order = (first, *(side for side in SIDES if side != first))
    size = max(calls // slices, 1)
    for _ in range(slices):
        for side in order:
            spent, database, samples, made = sides[side].load(
                requests["submit"], fig_http._check_submit, size, submits=True
            )
            cpu[side]["submit"] += spent
            cpu[side]["database"] += database
            submitted[side] += made
            latencies[side] += samples
            spent, _, _, _ = sides[side].load(requests["health"], fig_http._check_health, size, submits=False)
            cpu[side]["health"] += spent
    done = size * slices
    return {
        side: (
            1000 * cpu[side]["submit"] / submitted[side],
            1000 * cpu[side]["health"] / done,
            1000 * cpu[side]["database"] / submitted[side],
            1000 * statistics.median(latencies[side]),
        )
        for side in SIDES
    }


def start_servers(env: BenchEnv, other: Path) -> dict[str, Server]:
    # Each server rings its own doorbells (a Redis prefix of its own): its dashboards get
    # the cards of its own calls only, and all of that work is counted to it.
    return {
        "this": env.start_server("daphne"),
        "other": env.start_server("daphne", checkout=other, GATEHOUSE_REDIS_PREFIX=f"{env.redis_prefix}-other"),
    }


def measure(env: BenchEnv, other: Path, rounds: int, calls: int, dashboards: int, slices: int) -> dict[str, Turns]:
    servers = start_servers(env, other)
    turns = {side: Turns() for side in SIDES}
    sessions = env.fixtures["sessions"][:dashboards]
    requests = fig_http._requests(env.fixtures["agent_token"])
    with contextlib.ExitStack() as open_dashboards:
        sides = {
            name: Side(
                server,
                open_dashboards.enter_context(fig_http.dashboards_open(server.ws_url, server.url, sessions))
                if sessions
                else None,
                env.fixtures["agent_token"],
            )
            for name, server in servers.items()
        }
        _round(sides, requests, max(calls // 4, slices), slices, "this")  # warm: connections, caches, cards
        for n in range(rounds):
            measured = _round(sides, requests, calls, slices, SIDES[n % 2])
            for side, (submit, noop, database, p50) in measured.items():
                turns[side].submit_cpu_ms.append(submit)
                turns[side].noop_cpu_ms.append(noop)
                turns[side].submit_db_cpu_ms.append(database)
                turns[side].submit_p50_ms.append(p50)
            print(
                f"round {n + 1}/{rounds}: CPU per submit this {turns['this'].submit_cpu_ms[-1]:.2f} ms,"
                f" other {turns['other'].submit_cpu_ms[-1]:.2f} ms; PostgreSQL's"
                f" {turns['this'].submit_db_cpu_ms[-1]:.2f} and {turns['other'].submit_db_cpu_ms[-1]:.2f} ms",
                file=sys.stderr,
            )
        missing = {name: side.seen.missing if side.seen is not None else 0 for name, side in sides.items()}
        if any(missing.values()):
            raise RuntimeError(f"dashboards without the newest call's card 30 s after a slice: {missing}")
    return turns


@dataclass
class PushTurns:
    """One server's asks (`--push`), one entry per ask: each is paired with the other
    server's ask beside it."""

    first_card_ms: list[float] = field(default_factory=list)  # sent -> the first dashboard's card
    last_card_ms: list[float] = field(default_factory=list)  # sent -> the last dashboard's card
    pending_ms: list[float] = field(default_factory=list)  # sent -> the agent's own `pending`
    decided_ms: list[float] = field(default_factory=list)  # decision POST sent -> the agent's `decision`


def push_summary(turns: dict[str, PushTurns]) -> dict[str, dict[str, float]]:
    this, other = turns["this"], turns["other"]
    return {
        "submit -> the first dashboard's card, ms": paired(this.first_card_ms, other.first_card_ms),
        "submit -> the last dashboard's card, ms": paired(this.last_card_ms, other.last_card_ms),
        "submit -> the agent's own pending, ms": paired(this.pending_ms, other.pending_ms),
        "decision -> agent, ms": paired(this.decided_ms, other.decided_ms),
    }


def measure_push(env: BenchEnv, other: Path, asks: int, dashboards: int) -> dict[str, PushTurns]:
    servers = start_servers(env, other)
    sessions = env.fixtures["sessions"][:dashboards]

    async def scenario() -> dict[str, PushTurns]:
        opened: dict[str, tuple[push.Socket, list[push.Socket], Any]] = {}
        try:
            for side, server in servers.items():
                agent = await push.open_agent(server.ws_url, env.fixtures["agent_token"])
                opened[side] = (agent, [], push.approver_client(server.url, env.fixtures["approver_token"]))
                for session in sessions:
                    opened[side][1].append(await push.open_dashboard(server.ws_url, server.url, session))
            for side in SIDES:  # warm: the first decision opens connections and loads what deciding needs
                await push.measure_push(*opened[side], 2)
            turns = {side: PushTurns() for side in SIDES}
            for n in range(asks):
                for side in SIDES if n % 2 == 0 else SIDES[::-1]:
                    one = await push.measure_push(*opened[side], 1)
                    if one.errors:
                        raise RuntimeError(f"an ask on the {side} server failed: {one.errors[0]}")
                    turn = turns[side]
                    turn.first_card_ms.append(1000 * min(one.created))
                    turn.last_card_ms.append(1000 * max(one.created))
                    turn.pending_ms.append(1000 * one.pending[0])
                    turn.decided_ms.append(1000 * one.decided[0])
            return turns
        finally:
            for agent, dashboards_open, http in opened.values():
                for sock in [agent, *dashboards_open]:
                    await sock.close()
                await http.aclose()

    return asyncio.run(scenario())


def _delay_database(env: BenchEnv, delay_ms: float) -> subprocess.Popen[bytes]:
    """Point the servers' database at a `bench.delay` proxy; print what a round trip gains."""
    direct = urllib.parse.urlsplit(env.database_url)
    port = free_port()
    proxy = subprocess.Popen([sys.executable, "-m", "bench.delay", str(port), str(direct.port or 5432), str(delay_ms)])
    wait_for_port(port, process=proxy)
    credentials = f"{direct.netloc.rpartition('@')[0]}@" if "@" in direct.netloc else ""
    delayed = direct._replace(netloc=f"{credentials}127.0.0.1:{port}").geturl()
    rtt = {name: _select_one_ms(url) for name, url in (("direct", env.database_url), ("delayed", delayed))}
    print(
        f"PostgreSQL through bench.delay ({delay_ms} ms each way): SELECT 1 p50 {rtt['delayed']:.2f} ms,"
        f" direct {rtt['direct']:.2f} ms",
        file=sys.stderr,
    )
    env.database_url = delayed
    return proxy


def _select_one_ms(url: str, samples: int = 50) -> float:
    import psycopg

    times = []
    with psycopg.connect(url, autocommit=True) as connection:
        for _ in range(samples):
            started = time.perf_counter()
            connection.execute("SELECT 1").fetchone()
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=400, help="submits (and no-ops) per server per round")
    parser.add_argument("--dashboards", type=int, default=20, help="dashboards open on each server")
    parser.add_argument("--slices", type=int, default=8, help="turns per server per round")
    parser.add_argument("--json", type=Path, help="write every round's measurements here")
    parser.add_argument("--push", action="store_true", help="figure 5's latencies, paired ask by ask")
    parser.add_argument("--asks", type=int, default=200, help="with --push: asks per server")
    parser.add_argument(
        "--db-delay-ms",
        type=float,
        default=0.0,
        help="hold every chunk to and from PostgreSQL this long (bench.delay): the database across a network",
    )
    args = parser.parse_args()
    other = args.other.resolve()
    if not (other / "gatehouse" / "serve.py").is_file():
        parser.error(f"{other} is not a Gatehouse checkout")
    if other == ROOT:
        print("comparing this checkout with itself: the differences are the method's noise", file=sys.stderr)
    env = BenchEnv(quick=True)
    delayed: subprocess.Popen[bytes] | None = None
    try:
        env.start()
        if args.db_delay_ms:
            if not env.postgres:
                parser.error("--db-delay-ms needs PostgreSQL")
            delayed = _delay_database(env, args.db_delay_ms)
        if args.push:
            asked = measure_push(env, other, args.asks, args.dashboards)
            result, rounds = push_summary(asked), {side: asdict(turn) for side, turn in asked.items()}
            heading, pairs = f"{args.asks} asks on each server, {args.dashboards} dashboards open on each", "the asks"
        else:
            turns = measure(env, other, args.rounds, args.calls, args.dashboards, args.slices)
            result, rounds = summary(turns), {side: asdict(turn) for side, turn in turns.items()}
            heading = f"{args.rounds} rounds of {args.calls} calls, {args.dashboards} dashboards open on each server"
            pairs = "the rounds"
    finally:
        env.stop()
        if delayed is not None:
            delayed.terminate()
            delayed.wait()
    print(f"\n{heading}\nthis: {ROOT}\nother: {other}\n")
    print(f"| median | this | other | this - other (median of {pairs}) |\n|---|---|---|---|")
    for name, values in result.items():
        print(f"| {name} | {values['this']:.3f} | {values['other']:.3f} | {values['difference']:+.3f} |")
    if args.json:
        args.json.write_text(json.dumps({"summary": result, "rounds": rounds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
