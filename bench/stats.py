"""Percentiles and the result shapes every figure reports in."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


def percentile(values: list[float], pct: float) -> float:
    """The nearest-rank percentile (no interpolation: p99 of 100 samples is the 99th)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary_ms(seconds: list[float]) -> dict[str, float]:
    """p50/p95/p99/max in milliseconds of samples given in seconds."""
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p95_ms": round(percentile(ms, 95), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "max_ms": round(max(ms), 3) if ms else math.nan,
    }


def ratio(value: float, baseline: float) -> float:
    if not baseline or math.isnan(baseline) or math.isnan(value):
        return math.nan
    return round(value / baseline, 2)


@dataclass
class Row:
    """One line of the results table: a value beside the baseline measured in the same run."""

    metric: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    ratio: float | None = None
    goal: str = ""
    met: bool | None = None


@dataclass
class Figure:
    number: int
    title: str
    status: str = "measured"  # or "not measured"
    why: str = ""
    rows: list[Row] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    bottleneck: str = ""
    seconds: float = 0.0

    @property
    def goal_met(self) -> bool | None:
        judged = [row.met for row in self.rows if row.met is not None]
        if self.status != "measured" or not judged:
            return None
        return all(judged)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["goal_met"] = self.goal_met
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Figure:
        rows = [Row(**row) for row in data.get("rows", [])]
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "rows"}
        return cls(**known, rows=rows)


def not_measured(number: int, title: str, why: str) -> Figure:
    return Figure(number, title, status="not measured", why=why)
