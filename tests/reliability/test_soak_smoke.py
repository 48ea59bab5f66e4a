"""The soak script runs end to end at a tiny size (the real run is `python -m bench.soak`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live import ROOT


@pytest.mark.slow
class SoakSmokeTests:
    def test_it_runs_a_few_seconds_with_zero_errors_and_reports_a_verdict(self, tmp_path: Path) -> None:
        out = tmp_path / "soak.json"
        env = {**os.environ, "GATEHOUSE_SOAK_SQLITE": "1"}
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.soak",
                "--seconds",
                "6",
                "--agents",
                "3",
                "--rate",
                "2",
                "--dashboards",
                "2",
                "--ask-every",
                "4",
                "--out",
                str(out),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        report = json.loads(out.read_text())
        verdict = report["verdict"]
        assert verdict["errors"] == 0 and verdict["passed"]
        assert verdict["calls"] >= 20
        assert verdict["asks_decided"] >= 1
        assert verdict["dashboard_frames"] >= 2 and verdict["dashboard_cards"] >= verdict["dashboard_frames"]
        # Auto-decided calls are timed apart from the asks, which also wait for an approver.
        assert 0 < verdict["auto_p50_ms"] <= verdict["auto_p99_ms"]
        # Each decided ask's POST is timed, and its wait in the approvers' queue per window.
        assert 0 < verdict["decide_p50_ms"] <= verdict["decide_p99_ms"]
        assert any(window["queued_p99_ms"] is not None for window in report["windows"])
        assert report["windows"] and report["windows"][0]["rss_mib"] > 0
