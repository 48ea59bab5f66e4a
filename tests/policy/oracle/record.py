"""Record Claude Code's own permission outcomes for the differential suite.

    scripts/test-services.sh .venv/bin/python -m tests.policy.oracle.record

runs every case through the real CLI (``GATEHOUSE_CLAUDE_BIN``, else the one `make test`
installs) and rewrites ``tests/policy/oracle/claude-code-<version>.json``. Each
(mode, setting) batch is one CLI process in its own private mount namespace
(``unshare --mount``, root only): a tmpfs over ``/srv`` holds the layout and a fake
``rm`` hides the real one, so nothing outside the tmpfs is written or deleted.

``--only ID …`` runs just those cases and prints their outcomes as JSON (the live sample
in `make test` does this).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.e2e.claude_code.cli import claude_bin
from tests.e2e.claude_code.hookrun import ROOT as REPO
from tests.policy.oracle.cases import CALLS, EXTRA, HOME, MODES, OUTSIDE, PROJECT, SETTINGS, case_id

ORACLE_DIR = Path(__file__).resolve().parent
RECORD_COMMAND = "scripts/test-services.sh .venv/bin/python -m tests.policy.oracle.record"
# Each finished batch of a full recording is kept here, so `--resume` picks up after a failure.
KEEP = "var/oracle-batches"


def claude_version() -> str:
    done = subprocess.run([claude_bin(), "--version"], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()[0]


def recording_path(version: str) -> Path:
    return ORACLE_DIR / f"claude-code-{version}.json"


def batches(only: Iterable[str] | None = None) -> list[tuple[str, str, list[str]]]:
    """(mode, setting, call ids) for every batch holding a wanted case."""
    wanted = set(only) if only is not None else None
    out = []
    for mode in MODES:
        for setting in SETTINGS:
            calls = [c.id for c in CALLS if wanted is None or case_id(mode, setting, c) in wanted]
            if calls:
                out.append((mode, setting.name, calls))
    return out


def run_in_namespace(mode: str, setting: str, calls: list[str]) -> dict[str, Any]:
    """One batch in a fresh private mount namespace; its cases as the recording holds them."""
    worker = [sys.executable, "-m", "tests.policy.oracle.worker", mode, setting, *calls]
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", *worker],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{mode}/{setting} failed ({done.returncode}): {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def run_cases(only: Iterable[str] | None = None, jobs: int = 2, keep: Path | None = None) -> list[dict[str, Any]]:
    """Every wanted case through the CLI; with ``keep``, batches already kept there are reused."""

    def run(batch: tuple[str, str, list[str]]) -> dict[str, Any]:
        kept = keep / f"{batch[0]}.{batch[1]}.json" if keep else None
        if kept and kept.exists():
            result: dict[str, Any] = json.loads(kept.read_text())
            if [c["id"].rsplit("/", 1)[1] for c in result["cases"]] == batch[2]:
                return result
        result = run_in_namespace(*batch)
        if kept:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps(result))
        return result

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(run, batches(only)))
    return [case for result in results for case in result["cases"]]


def recording(cases: list[dict[str, Any]], version: str) -> dict[str, Any]:
    return {
        "claude_code": version,
        "command": RECORD_COMMAND,
        "layout": {"home": HOME, "project": PROJECT, "outside": OUTSIDE, "extra": EXTRA},
        "settings": {
            s.name: {"permissions": s.permissions(), "additional_directories": list(s.add_dirs)} for s in SETTINGS
        },
        "cases": sorted(cases, key=lambda c: c["id"]),
    }


def dumps(doc: dict[str, Any]) -> str:
    """The recording as JSON with one case a line, so a re-recording's diff reads case by case."""
    head = {k: v for k, v in doc.items() if k != "cases"}
    text = json.dumps(head, indent=1, sort_keys=True)[:-2]
    lines = ",\n".join("  " + json.dumps(case, sort_keys=True) for case in doc["cases"])
    return f'{text},\n "cases": [\n{lines}\n ]\n}}\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.policy.oracle.record", description=__doc__)
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these case ids; print JSON")
    parser.add_argument("--jobs", type=int, default=2, help="CLI processes at once (default 2)")
    parser.add_argument("--resume", action="store_true", help=f"reuse the batches an interrupted run kept in {KEEP}")
    args = parser.parse_args(argv)
    version = claude_version()
    if args.only is not None:
        cases = run_cases(args.only, args.jobs)
        json.dump(cases, sys.stdout, indent=1)
        return 0
    keep = REPO / KEEP / version
    if not args.resume:
        shutil.rmtree(keep, ignore_errors=True)
    cases = run_cases(None, args.jobs, keep)
    path = recording_path(version)
    path.write_text(dumps(recording(cases, version)))
    counts: dict[str, int] = {}
    for case in cases:
        counts[case["claude"]["behavior"]] = counts.get(case["claude"]["behavior"], 0) + 1
    print(f"{len(cases)} cases recorded with Claude Code {version} in {path.relative_to(REPO)}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
