"""`python -m bench.profile`: where the time goes on the slow paths.

Starts the same services as `python -m bench`, then:
- samples a Daphne server with py-spy while agents submit auto-decided requests with
  the team's 20 dashboards open (the HTTP figure) and while the push scenario runs (the push figure),
- runs the hook command under cProfile,
and prints the heaviest functions (inclusive time share of the samples) for each.
Collapsed stacks are kept in var/bench/profile-*.txt for flame graphs.

`--gil` keeps only the samples of the thread holding the GIL: the server's own Python
work. Without it, a thread blocked in a C call that py-spy does not know as idle (psycopg
sending a statement and waiting for its answer) counts as busy.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import pstats
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from bench import fig_hook, fig_http, push
from bench.env import BIN, BenchEnv
from bench.loadgen import run_load


def pyspy(pid: int, out: Path, seconds: int, gil: bool = False) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid`` for ``seconds`` at 200 Hz, every thread (``gil``: the GIL's holder only)."""
    return subprocess.Popen(
        [
            str(BIN / "py-spy"),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(seconds),
            "--rate",
            "200",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
            "--threads",
            *(["--gil"] if gil else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def top_frames(collapsed: Path, limit: int = 25, only_thread: str = "") -> list[tuple[str, float]]:
    """Inclusive share of samples per function (a function counted once per stack)."""
    totals: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if only_thread and only_thread not in stack.split(";", 1)[0]:
            continue
        count = int(count_text)
        frames = stack.split(";")
        idle = frames[-1].startswith(("select ", "poll ", "epoll", "wait ", "_worker ", "acquire "))
        if idle:
            continue
        samples += count
        for frame in set(frames):
            totals[frame] += count
    return [(frame, round(100 * n / samples, 1)) for frame, n in totals.most_common(limit)] if samples else []


def profile_http(env: BenchEnv, seconds: int, gil: bool = False) -> list[tuple[str, float]]:
    out = env.work_dir / "profile-http.txt"
    with (
        env.server("daphne") as server,
        fig_http.dashboards_open(server.ws_url, server.url, env.fixtures["sessions"]),
    ):
        factory = fig_http._requests(env.fixtures["agent_token"])["submit"]
        asyncio.run(run_load([server.port], 1, 20, factory, fig_http._check_submit))
        spy = pyspy(server.process.pid, out, seconds, gil)
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set():
                asyncio.run(run_load([server.port], 1, 20, factory, fig_http._check_submit))

        worker = threading.Thread(target=load)
        worker.start()
        spy.wait()
        stop.set()
        worker.join()
    return top_frames(out)


def profile_push(env: BenchEnv, seconds: int, gil: bool = False) -> list[tuple[str, float]]:
    out = env.work_dir / "profile-push.txt"

    async def scenario(server: Any) -> None:
        agent = await push.open_agent(server.ws_url, env.fixtures["agent_token"])
        dashboards = [await push.open_dashboard(server.ws_url, server.url, s) for s in env.fixtures["sessions"]]
        async with push.approver_client(server.url, env.fixtures["approver_token"]) as http:
            spy = pyspy(server.process.pid, out, seconds, gil)
            while spy.poll() is None:
                await push.measure_push(agent, dashboards, http, 2)
        for sock in [agent, *dashboards]:
            await sock.close()

    with env.server("daphne") as server:
        asyncio.run(scenario(server))
    return top_frames(out)


def profile_hook(env: BenchEnv) -> list[tuple[str, float]]:
    out = env.work_dir / "profile-hook.pstats"
    input_path = env.work_dir / "hook-input.json"
    with env.server("daphne") as server:
        input_path.write_text(json.dumps(fig_hook.hook_input(str(env.work_dir))))
        cmd = [fig_hook.bare_python3(), "-m", "cProfile", "-o", str(out), "-m", "agent.hook", "--server", server.url]
        with open(input_path, "rb") as stdin:
            subprocess.run(
                cmd,
                stdin=stdin,
                env=env.child_env(GATEHOUSE_TOKEN=env.fixtures["agent_token"]),
                cwd=Path(__file__).resolve().parent.parent,
                check=True,
                capture_output=True,
            )
    stats = pstats.Stats(str(out))
    total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (_, _, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((f"{name} ({Path(filename).name}:{line})", round(100 * cumulative / total, 1)))
    return sorted(rows, key=lambda r: -r[1])[:25]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seconds", nargs="?", type=int, default=15, help="seconds of sampling per scenario")
    parser.add_argument("--gil", action="store_true", help="only the samples of the thread holding the GIL")
    args = parser.parse_args(argv)
    env = BenchEnv(quick=True)
    samples = "samples holding the GIL" if args.gil else "busy samples"
    report: dict[str, Any] = {}
    try:
        env.start()
        report["hook (cProfile, % of wall)"] = profile_hook(env)
        report[f"HTTP submit (py-spy, % of {samples})"] = profile_http(env, args.seconds, args.gil)
        report[f"push scenario (py-spy, % of {samples})"] = profile_push(env, args.seconds, args.gil)
    finally:
        env.stop()
    for title, rows in report.items():
        print(f"\n## {title}")
        for frame, share in rows:
            print(f"{share:6.1f}%  {frame}")
    (env.work_dir / "profile.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
