"""Figure 8: the audit log at scale in PostgreSQL.

`python -m bench.fig_audit --rows N --out F` (a fresh process on the dedicated database
`gatehouse_bench_audit_<run>`) fills the log with N hash-chained decisions by COPY, then times
the page queries through the selectors the pages and the API use. `run(env)` then serves
that database with Daphne and streams a 100,000-row CSV export from `/api/v1/audit`,
watching the server's peak RSS (VmHWM) to show the export's memory stays flat.

Filling 1,000,000 rows takes minutes. With `GATEHOUSE_BENCH_AUDIT_REUSE=1` the filled log
is kept in its own database (`gatehouse_bench_audit_kept`, which the run does not drop)
and a later run reuses it when it holds as many rows and was filled less than 6 hours ago
(an older log's newest week holds fewer rows, which would flatter the page queries); new
migrations are applied to it, and the insert rates are those measured when it was filled.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.env import AUDIT_DB, pg_recreate, pg_url
from bench.stats import Figure, Row, percentile

TITLE = "Audit at scale (PostgreSQL)"
BOTTLENECK = (
    "CPU per index entry on a busy machine: the denials monitor reads only its partial covering indexes "
    "(index-only scans), but a week is ~40,000 denials (~1 us each: one GROUP BY over tool, agent, rule and "
    "decider; date_trunc per row; percentile_cont sorts ~40,000 latencies), so at load average 10 on 2 cores "
    "p95 lands near 100 ms; the 30-day window reads 4x as many (a daily roll-up of closed days would fix "
    "it). The CSV export, ~8x faster, is split between the database fetch (the request join, JSON decoding) "
    "and formatting each cell"
)
CHUNK = 50_000
AGENTS = 20
TOOLS = ["Bash"] * 10 + ["Edit"] * 4 + ["Read"] * 3 + ["WebFetch"] + ["mcp__github__create_issue"] * 2
DAYS = 30
KEPT_DB = "gatehouse_bench_audit_kept"
REUSE_MAX_AGE = timedelta(hours=6)
# Bump when `fill` writes different rows, so a kept log of the old shape is refilled.
FILL_VERSION = 1

REQUEST_COLUMNS = [
    "id",
    "agent_id",
    "team_id",
    "tool_use_id",
    "tool_name",
    "tool_input",
    "input_hash",
    "session_id",
    "cwd",
    "permission_mode",
    "context",
    "transcript_path",
    "evaluation",
    "permission_suggestions",
    "state",
    "version",
    "created_at",
    "deadline_at",
    "decided_at",
    "result",
    "result_at",
]
DECISION_COLUMNS = [
    "id",
    "request_id",
    "agent_id",
    "team_id",
    "tool_name",
    "session_id",
    "behavior",
    "message",
    "updated_input",
    "reason_type",
    "reason",
    "rule",
    "rule_source",
    "decided_by",
    "decided_by_user_id",
    "surface",
    "latency_ms",
    "created_at",
    "prev_hash",
    "hash",
    "format",
    "kind",
]


def _outcome(rng: random.Random, tool: str, user_id: int) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.70:
        rule = f"{tool}(git status)" if tool == "Bash" else tool
        return {
            "behavior": "allow",
            "reason_type": "rule",
            "rule": rule,
            "rule_source": "projectSettings",
            "reason": {"type": "rule", "rule": rule, "source": "projectSettings", "behavior": "allow"},
            "decided_by": f"rule {rule}",
            "surface": "engine",
            "user": None,
            "message": "",
        }
    if roll < 0.80:
        rule = "Bash(rm -rf *)" if tool == "Bash" else f"{tool}(~/.ssh/**)"
        return {
            "behavior": "deny",
            "reason_type": "rule",
            "rule": rule,
            "rule_source": "policySettings",
            "reason": {"type": "rule", "rule": rule, "source": "policySettings", "behavior": "deny"},
            "decided_by": f"rule {rule}",
            "surface": "engine",
            "user": None,
            "message": f"Denied by {rule}",
        }
    if roll < 0.97:
        behavior = "allow" if rng.random() < 0.75 else "deny"
        return {
            "behavior": behavior,
            "reason_type": "user",
            "rule": "",
            "rule_source": "",
            "reason": {"type": "user", "decided_by": "alice", "surface": "web"},
            "decided_by": "alice",
            "surface": "web",
            "user": user_id,
            "message": "",
        }
    return {
        "behavior": "deny",
        "reason_type": "timeout",
        "rule": "",
        "rule_source": "",
        "reason": {"type": "timeout"},
        "decided_by": "timeout",
        "surface": "timer",
        "user": None,
        "message": "Nobody approved this call before its deadline.",
    }


def fill(rows: int, team_id: int, agent_ids: list[int], user_id: int) -> dict[str, Any]:
    """COPY `rows` requests and their hash-chained decisions, in chunks; return the rates."""
    from django.db import connection

    from approvals.audit import CURRENT_FORMAT, GENESIS_HASH, canonical_json, input_hash, row_hash
    from approvals.models import Agent

    rng = random.Random(9)
    start = datetime.now(UTC) - timedelta(days=DAYS)
    step = timedelta(days=DAYS) / rows
    prev = GENESIS_HASH
    build_s = copy_s = 0.0
    connection.ensure_connection()
    raw = connection.connection
    next_id = 1
    agent_names = dict(Agent.objects.filter(pk__in=agent_ids).values_list("pk", "name"))
    for offset in range(0, rows, CHUNK):
        t0 = time.perf_counter()
        request_rows: list[tuple[Any, ...]] = []
        decision_rows: list[tuple[Any, ...]] = []
        for i in range(offset, min(rows, offset + CHUNK)):
            tool = rng.choice(TOOLS)
            agent_id = agent_ids[i % len(agent_ids)]
            created = start + step * i
            tool_input: dict[str, Any] = (
                {"command": f"git status --short {i % 97}"} if tool == "Bash" else {"file_path": f"/srv/f{i % 500}.py"}
            )
            outcome = _outcome(rng, tool, user_id)
            request_id = uuid.uuid4()
            session = f"session-{agent_id}-{i // 200}"
            request_rows.append(
                (
                    request_id,
                    agent_id,
                    team_id,
                    f"toolu_{i}",
                    tool,
                    canonical_json(tool_input),
                    input_hash(tool_input),
                    session,
                    "/srv/app",
                    "default",
                    "interactive",
                    "",
                    "{}",
                    "[]",
                    "decided",
                    1,
                    created,
                    None,
                    created,
                    None,
                    None,
                )
            )
            # row_hash only reads attributes; a namespace is 10x cheaper to build than a model.
            request = SimpleNamespace(
                tool_use_id=f"toolu_{i}",
                tool_name=tool,
                tool_input=tool_input,
                input_hash=input_hash(tool_input),
                session_id=session,
                cwd="/srv/app",
                permission_mode="default",
                context="interactive",
                transcript_path="",
                evaluation={},
                permission_suggestions=[],
                agent=SimpleNamespace(name=agent_names[agent_id]),
                created_at=created,
            )
            decision = SimpleNamespace(
                format=CURRENT_FORMAT,
                kind="decision",
                request=request,
                request_id=request_id,
                agent_id=agent_id,
                team_id=team_id,
                tool_name=tool,
                session_id=session,
                behavior=outcome["behavior"],
                message=outcome["message"],
                updated_input=None,
                reason_type=outcome["reason_type"],
                reason=outcome["reason"],
                rule=outcome["rule"],
                rule_source=outcome["rule_source"],
                decided_by=outcome["decided_by"],
                decided_by_user_id=outcome["user"],
                surface=outcome["surface"],
                latency_ms=rng.uniform(20_000, 90_000) if outcome["reason_type"] == "user" else rng.uniform(0.2, 2.0),
                created_at=created,
            )
            digest = row_hash(decision, prev)  # type: ignore[arg-type]
            decision_rows.append(
                (
                    next_id,
                    request_id,
                    agent_id,
                    team_id,
                    tool,
                    session,
                    decision.behavior,
                    decision.message,
                    None,
                    decision.reason_type,
                    canonical_json(decision.reason),
                    decision.rule,
                    decision.rule_source,
                    decision.decided_by,
                    decision.decided_by_user_id,
                    decision.surface,
                    decision.latency_ms,
                    created,
                    prev,
                    digest,
                    CURRENT_FORMAT,
                    decision.kind,
                )
            )
            prev = digest
            next_id += 1
        t1 = time.perf_counter()
        with raw.cursor() as cur:
            with cur.copy(f"COPY approvals_permissionrequest ({', '.join(REQUEST_COLUMNS)}) FROM STDIN") as copy:
                for row in request_rows:
                    copy.write_row(row)
            with cur.copy(f"COPY approvals_decision ({', '.join(DECISION_COLUMNS)}) FROM STDIN") as copy:
                for row in decision_rows:
                    copy.write_row(row)
        raw.commit()
        build_s += t1 - t0
        copy_s += time.perf_counter() - t1
    with raw.cursor() as cur:
        cur.execute("SELECT setval(pg_get_serial_sequence('approvals_decision', 'id'), %s)", [next_id])
        # What autovacuum keeps true of a live log (migration 0005 has it visit the log
        # every 10,000 decisions): pages marked all-visible, so index-only scans skip them.
        cur.execute("VACUUM (ANALYZE) approvals_permissionrequest")
        cur.execute("VACUUM (ANALYZE) approvals_decision")
    raw.commit()
    filled = {
        "rows": rows,
        "build_s": round(build_s, 1),
        "copy_s": round(copy_s, 1),
        "decisions_per_s_copy": round(rows / copy_s),
        "decisions_per_s_end_to_end": round(rows / (build_s + copy_s)),
    }
    _record_fill(filled)
    return filled


def _record_fill(filled: dict[str, Any]) -> None:
    """Label the database with what it was filled with, for a later run to reuse it."""
    from django.db import connection
    from psycopg import sql

    record = {**filled, "version": FILL_VERSION, "filled_at": datetime.now(UTC).isoformat()}
    statement = sql.SQL("COMMENT ON DATABASE {} IS {}").format(
        sql.Identifier(connection.settings_dict["NAME"]), sql.Literal(json.dumps(record))
    )
    with connection.connection.cursor() as cur:
        cur.execute(statement)


def kept_fill(rows: int) -> dict[str, Any] | None:
    """The fill record of the kept database if it can serve a run of `rows` rows, else None."""
    import psycopg

    try:
        with psycopg.connect(pg_url(KEPT_DB), connect_timeout=2) as conn:
            found = conn.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = current_database()"
            ).fetchone()
    except psycopg.Error:
        return None
    try:
        record = json.loads(found[0]) if found and found[0] else None
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("rows") != rows or record.get("version") != FILL_VERSION:
        return None
    if datetime.now(UTC) - datetime.fromisoformat(record["filled_at"]) > REUSE_MAX_AGE:
        return None
    return record


def time_queries(iterations: int, agent_names: list[str], user: Any) -> dict[str, Any]:
    """p50/p95 in ms of each page query, evaluated to Python objects as a page would."""
    from approvals import selectors

    rng = random.Random(8)
    now = datetime.now(UTC)
    since_week = now - timedelta(days=7)

    def audit_first_page() -> Any:
        return list(selectors.audit_rows({}, user)[:100])

    def audit_deep_page() -> Any:
        # A cursor page in the middle of the log: keyset on id, like the API's cursor.
        rows = selectors.audit_rows({}, user)
        return list(rows.filter(id__lt=rng.randint(1000, 500_000))[:100])

    def audit_filtered() -> Any:
        begin = now - timedelta(days=rng.uniform(2, DAYS))
        filters = {
            "agent": rng.choice(agent_names),
            "tool": rng.choice(["Bash", "Edit", "Read"]),
            "since": begin,
            "until": begin + timedelta(days=1),
        }
        return list(selectors.audit_rows(filters, user)[:100])

    def denials_over_time() -> Any:
        return selectors.denials_over_time(user, since_week)

    def denials_by_all() -> Any:
        return selectors.denials_top(user, since_week)

    def human_stats() -> Any:
        return selectors.human_decision_stats(user, since_week)

    queries = {
        "audit list, first page": audit_first_page,
        "audit list, deep cursor page": audit_deep_page,
        "audit filtered (agent + tool + 1-day range)": audit_filtered,
        "denials over time (7 days, daily)": denials_over_time,
        "denials by tool/agent/rule/decider (7 days)": denials_by_all,
        "human time-to-decision + timeout rate (7 days)": human_stats,
    }
    results = {}
    for name, query in queries.items():
        query()  # the first run pays for plan and cache; pages are served warm
        samples = []
        for _ in range(iterations):
            t0 = time.perf_counter()
            query()
            samples.append(time.perf_counter() - t0)
        results[name] = {
            "p50_ms": round(percentile(samples, 50) * 1000, 2),
            "p95_ms": round(percentile(samples, 95) * 1000, 2),
        }
    return results


def worker(rows: int, iterations: int, kept: dict[str, Any] | None) -> dict[str, Any]:
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from approvals import services
    from approvals.models import Agent

    if kept is None:
        team = services.default_team()
        agents = [services.agent_create(name=f"audit-agent-{i}", team=team)[0] for i in range(AGENTS)]
        alice = get_user_model().objects.create_user(username="alice", password="alice-bench-password-1")
        services.membership_set(user=alice, team=team, role="approver")
        filled = fill(rows, team.pk, [a.pk for a in agents], alice.pk)
    else:
        agents = list(Agent.objects.filter(name__startswith="audit-agent-").order_by("pk"))
        alice = get_user_model().objects.get(username="alice")
        filled = kept
    token = services.personal_token_create(user=alice)
    queries = time_queries(iterations, [a.name for a in agents], alice)
    return {"fill": filled, "queries": queries, "approver_token": token}


def _export(server: Any, token: str, rows: int, total_rows: int) -> dict[str, Any]:
    """Stream a CSV export of the newest `rows` rows; the server's peak RSS before and after."""
    import httpx

    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=600) as client:
        cut = client.get("/api/v1/audit", params={"page_size": 1}).json()
        newest = cut["results"][0]["created_at"] if cut.get("results") else None
        if newest is None:
            raise RuntimeError(f"unexpected audit list answer: {str(cut)[:200]}")
        # Rows are evenly spaced in time, so a time window selects `rows` of them.
        span = timedelta(days=DAYS) * rows / total_rows
        until = datetime.fromisoformat(newest.replace("Z", "+00:00")) + timedelta(seconds=1)
        params = {"format": "csv", "since": (until - span).isoformat(), "until": until.isoformat()}
        hwm_before = _vm_hwm(server.process.pid)
        lines = 0
        t0 = time.perf_counter()
        with client.stream("GET", "/api/v1/audit", params=params) as response:
            response.raise_for_status()
            for chunk in response.iter_lines():
                lines += 1 if chunk else 0
        seconds = time.perf_counter() - t0
        return {
            "rows": lines - 1,
            "seconds": round(seconds, 2),
            "rows_per_s": round((lines - 1) / seconds),
            "peak_rss_before_mib": round(hwm_before / 1024, 1),
            "peak_rss_after_mib": round(_vm_hwm(server.process.pid) / 1024, 1),
        }


def _vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def run(env: Any) -> Figure:
    if not env.postgres:
        return Figure(8, TITLE, status="not measured", why="PostgreSQL is not reachable at 127.0.0.1:5432")
    rows, iterations, export_rows = env.pick((2_000, 2, 500), (10_000, 10, 2_000), (1_000_000, 40, 100_000))
    reuse = os.environ.get("GATEHOUSE_BENCH_AUDIT_REUSE") == "1"
    kept = kept_fill(rows) if reuse else None
    url = pg_url(KEPT_DB) if kept else pg_recreate(KEPT_DB if reuse else AUDIT_DB)
    env.manage("migrate", "--noinput", "-v", "0", DATABASE_URL=url)
    data = env.django_json(
        "bench.fig_audit",
        "--rows",
        str(rows),
        "--iterations",
        str(iterations),
        *(["--kept", json.dumps(kept)] if kept else []),
        timeout=1500,
        DATABASE_URL=url,
    )
    data["reused_log"] = kept is not None
    with env.server("daphne", DATABASE_URL=url) as server:
        try:
            small = _export(server, data["approver_token"], export_rows // 10, rows)
            data["export"] = _export(server, data["approver_token"], export_rows, rows)
            data["export_small"] = small
        except Exception as exc:
            data["export_error"] = f"{type(exc).__name__}: {exc}"[:300]
    data.pop("approver_token", None)
    figure = Figure(8, TITLE, details=data)
    fill_data = data["fill"]
    when = f", kept log filled {fill_data['filled_at'][:16]}" if data["reused_log"] else ""
    figure.rows.append(
        Row(f"insert rate, COPY with indexes ({rows:,} rows{when})", fill_data["decisions_per_s_copy"], "rows/s")
    )
    figure.rows.append(Row("insert rate incl. hash chain in Python", fill_data["decisions_per_s_end_to_end"], "rows/s"))
    for name, q in data["queries"].items():
        figure.rows.append(Row(f"{name} p95", q["p95_ms"], "ms", None, "", None, "p95 < 100 ms", q["p95_ms"] < 100))
    export = data.get("export")
    if export:
        small = data["export_small"]
        growth = export["peak_rss_after_mib"] - export["peak_rss_before_mib"]
        figure.rows.append(Row(f"CSV export of {export['rows']:,} rows (streamed)", export["seconds"], "s"))
        figure.rows.append(
            Row(
                "server peak RSS growth during the big export",
                round(growth, 1),
                "MiB",
                round(small["peak_rss_after_mib"] - small["peak_rss_before_mib"], 1),
                f"growth during a {small['rows']:,}-row export",
                None,
                "constant memory: < 50 MiB",
                growth < 50,
            )
        )
    else:
        figure.rows.append(Row("CSV export", float("nan"), "", None, "", None, data.get("export_error", ""), False))
    return figure


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--kept", default="", help="the kept log's fill record: reuse it, do not fill")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    kept = json.loads(args.kept) if args.kept else None
    Path(args.out).write_text(json.dumps(worker(args.rows, args.iterations, kept), default=str))


if __name__ == "__main__":
    main()
