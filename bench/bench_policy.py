"""Micro-benchmark of ``policy.decide``: decisions/second and p50/p99 per decision.

Run ``python bench/bench_policy.py [--quick] [--json PATH]``. Rules are compiled once
(as the server caches them) and passed with ``rules=``; each row times one call shape
at 10, 200 and 2,000 rules. The baseline row (a dict lookup plus ``json.dumps`` of the
input) is measured in the same run so figures can be read as a ratio on any machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.facts import gather
from policy import compile_rules, decide

RULE_COUNTS = (10, 200, 2000)
CWD = "/srv/project"


def make_rules(count: int) -> list[dict[str, Any]]:
    """A realistic mix: Bash prefixes, file patterns, domains; the hit rules last."""
    behaviors = ("allow", "deny", "ask")
    sources = ("userSettings", "projectSettings", "localSettings", "policySettings")
    items: list[dict[str, Any]] = []
    for index in range(count - 2):
        behavior, source = behaviors[index % 3], sources[index % 4]
        shape = index % 4
        if shape == 0:
            rule = f"Bash(tool{index} run:*)"
        elif shape == 1:
            rule = f"Bash(cmd{index} *)"
        elif shape == 2:
            rule = f"Edit(gen{index}/**)" if behavior != "deny" else f"Read(//secret{index}/**)"
        else:
            rule = f"WebFetch(domain:site{index}.example.com)"
        items.append({"rule": rule, "behavior": behavior, "source": source})
    items.append({"rule": "Bash(git status:*)", "behavior": "allow", "source": "projectSettings"})
    items.append({"rule": "Edit(src/**)", "behavior": "allow", "source": "projectSettings"})
    return items


CALLS: dict[str, dict[str, Any]] = {
    "Bash": {"tool_name": "Bash", "tool_input": {"command": "git status"}, "cwd": CWD, "home": "/home/bench"},
    "Edit": {
        "tool_name": "Edit",
        "cwd": CWD,
        "home": "/home/bench",
        "tool_input": {"file_path": f"{CWD}/src/app.py", "old_string": "", "new_string": "x"},
    },
}
# Each call carries the facts its agent reports (gathered once, outside the timing), as a
# hook's call does: without them a path-dependent allow is an ask.
for _doc in CALLS.values():
    _doc["facts"] = gather(_doc["tool_name"], _doc["tool_input"], CWD, [], _doc["home"])


def measure(function: Callable[[], Any], iterations: int) -> dict[str, float]:
    for _ in range(min(200, iterations)):
        function()  # warm caches (parser, analysis, working directories)
    samples: list[int] = []
    gc.disable()  # collector pauses are the caller's concern, not the engine's
    try:
        for _ in range(iterations):
            start = time.perf_counter_ns()
            function()
            samples.append(time.perf_counter_ns() - start)
    finally:
        gc.enable()
    samples.sort()
    total = sum(samples)
    return {
        "iterations": iterations,
        "per_second": round(iterations / (total / 1e9)),
        "p50_us": round(samples[len(samples) // 2] / 1000, 2),
        "p99_us": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))] / 1000, 2),
    }


def run(iterations: int) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    lookup_table = {name: index for index, name in enumerate(("Bash", "Read", "Edit", "Write"))}
    baseline_doc = CALLS["Bash"]
    results.append(
        {
            "case": "baseline (dict lookup + json.dumps)",
            "rules": 0,
            **measure(
                lambda: (lookup_table[baseline_doc["tool_name"]], json.dumps(baseline_doc["tool_input"])), iterations
            ),
        }
    )
    for count in RULE_COUNTS:
        compiled = compile_rules(make_rules(count))
        for name, doc in CALLS.items():
            expected = decide(doc, rules=compiled)
            assert expected.behavior == "allow", expected.to_dict()
            figures = measure(partial(decide, doc, rules=compiled), iterations)
            results.append({"case": f"{name} allow", "rules": count, **figures})
    return results


def print_table(results: list[dict[str, Any]]) -> None:
    baseline = results[0]["p50_us"] or 1.0
    print(f"{'case':38} {'rules':>6} {'decisions/s':>12} {'p50 µs':>9} {'p99 µs':>9} {'p50/base':>9}")
    for row in results:
        ratio = row["p50_us"] / baseline
        print(
            f"{row['case']:38} {row['rules']:>6} {row['per_second']:>12,} "
            f"{row['p50_us']:>9.1f} {row['p99_us']:>9.1f} {ratio:>8.1f}x"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--iterations", type=int, default=None)
    args = parser.parse_args(argv)
    iterations = args.iterations or (500 if args.quick else 5000)
    results = run(iterations)
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps({"benchmark": "policy.decide", "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
