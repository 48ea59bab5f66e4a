"""Print the results table, write `bench/results.json`, rewrite the table in the docs."""

from __future__ import annotations

import json
import math
import os
import platform
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.stats import Figure

BEGIN = "<!-- bench:results:begin -->"
END = "<!-- bench:results:end -->"


def machine() -> dict[str, Any]:
    cpu = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kib = 0
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        mem_kib = int(meminfo.read_text().split()[1])
    return {
        "cpu": cpu or platform.processor(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def table_lines(figures: list[Figure]) -> list[str]:
    lines = [
        "| # | figure / metric | value | baseline (same run) | ratio | goal | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for fig in figures:
        if fig.status != "measured":
            lines.append(f"| {fig.number} | **{fig.title}** | not measured: {fig.why} | | | | |")
            continue
        lines.append(f"| {fig.number} | **{fig.title}** | | | | | {verdict(fig.goal_met)} |")
        for row in fig.rows:
            base = f"{fmt(row.baseline)} {row.unit} ({row.baseline_name})" if row.baseline is not None else ""
            lines.append(
                f"| | {row.metric} | {fmt(row.value)} {row.unit} | {base} | {fmt(row.ratio)} | {row.goal} | "
                f"{verdict(row.met)} |"
            )
    return lines


def verdict(met: bool | None) -> str:
    return {True: "yes", False: "**no**", None: ""}[met]


def print_table(figures: list[Figure]) -> None:
    for line in table_lines(figures):
        print(line)


def write_json(path: Path, figures: list[Figure], meta: dict[str, Any]) -> None:
    finished = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    data = {**meta, "finished_at": finished, "machine": machine(), "figures": [fig.to_dict() for fig in figures]}
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def markdown_block(figures: list[Figure], meta: dict[str, Any], machine_info: dict[str, Any] | None = None) -> str:
    info = machine_info or machine()
    when = meta.get("finished_at") or datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        BEGIN,
        f"Run: {when}, `python -m bench{' --quick' if meta.get('quick') else ''}` in {meta.get('seconds', 0):.0f} s; "
        f"database {meta.get('database')}, Redis {meta.get('redis')}.",
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB, {info['os']}, "
        f"Python {info['python']}, load average at the end {info['load_average']} (shared machine).",
        "",
        *table_lines(figures),
        "",
        "Bottlenecks of the figures that miss their goal:",
        "",
    ]
    missed = [fig for fig in figures if fig.goal_met is False]
    for fig in missed:
        lines.append(f"- **{fig.number}. {fig.title}**: {fig.bottleneck or 'not profiled yet'}")
    if not missed:
        lines.append("- none")
    lines.append(END)
    return "\n".join(lines)


def update_docs(
    path: Path, figures: list[Figure], meta: dict[str, Any], machine_info: dict[str, Any] | None = None
) -> None:
    """Replace the results block between the markers; keep the rest of the page as written."""
    block = markdown_block(figures, meta, machine_info)
    text = path.read_text() if path.exists() else f"# Performance\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text = text.rstrip() + f"\n\n## Latest results\n\n{BEGIN}\n{END}\n"
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    path.write_text(pattern.sub(lambda _: block, text, count=1))
