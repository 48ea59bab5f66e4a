"""Figure 9: what-if replay of a rule draft over the team's recorded calls.

`python -m bench.fig_whatif --calls N --out F` (a fresh process on the run's database)
records N calls of one team — a third of them answered by a person — then replays them
all with a draft that adds one allow rule, through `approvals.learning.what_if`, the code
`POST /api/v1/rules/what-if` runs. Baseline: reading the same rows, no engine.

The calls repeat as an agent's do (a few thousand distinct commands, files and hosts over
100,000 calls), which is what the replay's per-call memo is for; the row says how many
were distinct, so the figure cannot flatter itself with one call repeated.
"""

from __future__ import annotations

import argparse
import json
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.env import BenchEnv
from bench.stats import Figure, Row, ratio

TITLE = "What-if: replay recorded calls with a draft"
BOTTLENECK = "the engine per distinct call (shell parse, path checks) and decoding each row's JSON input"
# "100,000 recorded calls replay in seconds"; the cost follows the distinct calls, not the
# rows, so a smaller run is held to the same bound rather than a proportional one.
GOAL_SECONDS = 10.0
BATCH = 5000


def _call(rng: random.Random, i: int) -> tuple[str, dict[str, Any]]:
    kind = rng.random()
    if kind < 0.55:
        command = rng.choice(
            [
                f"npm run test -- --grep case{i % 700}",
                f"pytest -k test_{i % 900}",
                f"git diff HEAD~{i % 40}",
                f"make build{i % 30}",
                f"cargo build --bin tool{i % 50}",
            ]
        )
        return "Bash", {"command": command}
    if kind < 0.8:
        path = f"/srv/app/src/module{i % 600}.py"
        return "Edit", {"file_path": path, "old_string": "a", "new_string": "b"}
    if kind < 0.95:
        return "Read", {"file_path": f"/srv/app/docs/page{i % 400}.md"}
    return "WebFetch", {"url": f"https://site{i % 80}.example.com/", "prompt": "summarise"}


def fill(calls: int) -> dict[str, Any]:
    """Record `calls` asks of one agent; a third answered by a person."""
    from approvals import services
    from approvals.audit import input_hash
    from approvals.models import Decision, PermissionRequest, Team

    team = Team.objects.create(name=f"whatif-{uuid.uuid4().hex[:8]}")
    agent, _ = services.agent_create(name="replayed", team=team)
    rng = random.Random(20)
    now = datetime.now(UTC)
    distinct: set[str] = set()
    for offset in range(0, calls, BATCH):
        requests, decisions = [], []
        for i in range(offset, min(calls, offset + BATCH)):
            tool, tool_input = _call(rng, i)
            distinct.add(json.dumps([tool, tool_input], sort_keys=True))
            request = PermissionRequest(
                id=uuid.uuid4(),
                agent=agent,
                team=team,
                tool_use_id=f"toolu_{i}",
                tool_name=tool,
                tool_input=tool_input,
                input_hash=input_hash(tool_input),
                session_id=f"s{i // 50}",
                cwd="/srv/app",
                evaluation={"behavior": "ask"},
                state="decided",
            )
            requests.append(request)
            if i % 3 == 0:
                decisions.append(_human(request, rng, now))
        PermissionRequest.objects.bulk_create(requests)  # created_at: now (auto_now_add)
        Decision.objects.bulk_create(decisions)
    return {"team_id": team.pk, "distinct": len(distinct)}


def _human(request: Any, rng: random.Random, created: datetime) -> Any:
    from approvals.models import Decision

    behavior = "allow" if rng.random() < 0.85 else "deny"
    return Decision(
        request=request,
        agent_id=request.agent_id,
        team_id=request.team_id,
        tool_name=request.tool_name,
        session_id=request.session_id,
        behavior=behavior,
        reason_type="user",
        reason={"type": "user", "decided_by": "alice", "surface": "web"},
        decided_by="alice",
        surface="web",
        created_at=created,
        prev_hash=uuid.uuid4().hex,  # not a chain: the replay never reads the hashes
        hash=uuid.uuid4().hex,
    )


def measure(team_id: int) -> dict[str, Any]:
    from approvals import learning
    from approvals.models import Rule

    since, until = datetime.now(UTC) - timedelta(days=1), datetime.now(UTC) + timedelta(minutes=1)
    t0 = time.perf_counter()
    rows = sum(1 for _ in learning.recorded_calls(team_id, since, until))
    read_s = time.perf_counter() - t0
    draft = learning.Draft(add=[Rule(rule="Bash(npm run test:*)", behavior="allow", source="localSettings")])
    t0 = time.perf_counter()
    found = learning.what_if(team_id=team_id, draft=draft, since=since, until=until, offset=0, limit=50)
    replay_s = time.perf_counter() - t0
    return {
        "rows": rows,
        "read_s": round(read_s, 3),
        "replay_s": round(replay_s, 3),
        "changed": found.total_changed,
        "flagged": found.flagged,
        "counts": dict(found.counts),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fig_whatif")
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import django

    django.setup()
    filled = fill(args.calls)
    result = {**filled, **measure(filled["team_id"])}
    Path(args.out).write_text(json.dumps(result))


def run(env: BenchEnv) -> Figure:
    calls = env.pick(2_000, 20_000, 100_000)
    result = env.django_json("bench.fig_whatif", "--calls", str(calls), timeout=1800)
    replay_s, read_s = result["replay_s"], result["read_s"]
    rows = [
        Row(
            f"{calls:,} calls replayed ({result['distinct']:,} distinct)",
            replay_s,
            "s",
            read_s,
            "reading the rows",
            ratio(replay_s, read_s),
            f"<= {GOAL_SECONDS:g} s",
            replay_s <= GOAL_SECONDS,
        ),
        Row("calls per second", round(result["rows"] / replay_s) if replay_s else 0.0, "calls/s"),
    ]
    return Figure(9, TITLE, rows=rows, details=result)


if __name__ == "__main__":
    main()
