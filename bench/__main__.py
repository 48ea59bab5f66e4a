"""`python -m bench [--quick] [--only 1,2,...]`: every figure of issue 9, side by side, in one run.

Starts what it needs (a private Redis unless REDIS_URL answers, scratch databases,
Daphne and Uvicorn processes), stops it all at the end, prints the table, writes
`bench/results.json` and rewrites the results block of `docs/PERFORMANCE.md`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from bench import report
from bench.env import ROOT, BenchEnv
from bench.stats import Figure, not_measured

# Figure number → module; the order is the order they run in (cheap and independent first).
FIGURES: dict[int, str] = {
    1: "bench.fig_engine",
    6: "bench.fig_claims",
    4: "bench.fig_hook",
    2: "bench.fig_http",  # runs figure 3 (Uvicorn) in the same pass
    5: "bench.fig_push",
    7: "bench.fig_scale",
    8: "bench.fig_audit",
    9: "bench.fig_whatif",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer iterations and rows (< 2 minutes)")
    parser.add_argument("--smoke", action="store_true", help="tiniest sizes: checks every figure still runs")
    parser.add_argument("--only", default="", help="comma-separated figure numbers, e.g. 1,6")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results.json"), help="where to write results")
    parser.add_argument("--docs", default=str(ROOT / "docs" / "PERFORMANCE.md"), help="page whose table to rewrite")
    parser.add_argument("--no-docs", action="store_true", help="do not touch docs/PERFORMANCE.md")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: re-render the table and docs from the --json results",
    )
    return parser.parse_args(argv)


def run_figure(number: int, module_name: str, env: BenchEnv) -> list[Figure]:
    started = time.monotonic()
    try:
        module = importlib.import_module(module_name)
        result = module.run(env)
        figures = result if isinstance(result, list) else [result]
    except Exception as exc:
        traceback.print_exc()
        figures = [not_measured(number, module_name, f"the benchmark failed: {type(exc).__name__}: {exc}"[:300])]
    for figure in figures:
        figure.seconds = round(time.monotonic() - started, 1)
    return figures


def name_bottlenecks(figures: list[Figure]) -> None:
    """Each figure that misses its goal names what the profiles found (its module's BOTTLENECK)."""
    modules = {n: m for n, m in FIGURES.items()} | {3: FIGURES[2]}
    for figure in figures:
        if figure.goal_met is False and figure.number in modules:
            module = importlib.import_module(modules[figure.number])
            text = getattr(module, "BOTTLENECK3" if figure.number == 3 else "BOTTLENECK", "")
            figure.bottleneck = text or figure.bottleneck


def rewrites_docs(args: argparse.Namespace) -> bool:
    """The page keeps a full run's table: quick and smoke sizes are for checking, and some
    figures (`--only`) would replace every figure's rows with theirs."""
    return not (args.no_docs or args.quick or args.smoke or args.only)


def report_only(args: argparse.Namespace) -> int:
    path = Path(args.json)
    data = json.loads(path.read_text())
    # A results file from before finished_at was recorded: its modification time is the run's end.
    stamp = datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M UTC")
    data.setdefault("finished_at", stamp)
    figures = [Figure.from_dict(item) for item in data["figures"]]
    name_bottlenecks(figures)
    report.print_table(figures)
    if not args.no_docs:
        report.update_docs(Path(args.docs), figures, data, machine_info=data.get("machine"))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_only:
        return report_only(args)
    wanted = {int(n) for n in args.only.split(",") if n.strip()} or set(FIGURES) | {3}
    env = BenchEnv(quick=args.quick, smoke=args.smoke)
    started = time.monotonic()
    figures: list[Figure] = []
    try:
        env.start()
        for number, module_name in FIGURES.items():
            if number in wanted or (number == 2 and 3 in wanted):
                print(f"--- figure {number} ({module_name})", file=sys.stderr, flush=True)
                figures.extend(run_figure(number, module_name, env))
    finally:
        env.stop()
    figures = sorted((f for f in figures if f.number in wanted), key=lambda f: f.number)
    name_bottlenecks(figures)
    meta = {
        "quick": args.quick,
        "smoke": args.smoke,
        "seconds": round(time.monotonic() - started, 1),
        "database": env.database_kind,
        "redis": "private redis-server" if env._private_redis else "REDIS_URL",
    }
    report.print_table(figures)
    report.write_json(Path(args.json), figures, meta)
    if rewrites_docs(args):
        report.update_docs(Path(args.docs), figures, meta)
    print(f"\n{len(figures)} figures in {meta['seconds']} s; results in {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
