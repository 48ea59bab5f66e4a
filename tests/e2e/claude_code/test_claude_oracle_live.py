"""A live sample of the differential suite: the real CLI still does what the recording says.

Each run picks a few dozen recorded cases (one batch per mode, seeded by the day, so the
sample moves over the whole recording; `GATEHOUSE_ORACLE_SEED` repeats one) and runs them
through Claude Code 2.1.332 again, each batch in its own mount namespace with a fake
`rm`. A case Claude Code now answers differently means the recording has rotted:
re-record it (the command is in the failure).
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from collections import defaultdict
from typing import Any

import pytest

from tests.e2e.claude_code.cli import claude_bin
from tests.policy.oracle import compare, record
from tests.policy.oracle.cases import ROOT

pytestmark = [pytest.mark.claude_cli]

PER_BATCH = 8


def _namespace_problem() -> str | None:
    try:
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "tmpfs", ROOT],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare is not available: {exc}"
    return None if done.returncode == 0 else f"cannot make a mount namespace: {done.stderr.strip()}"


def sample(seed: int) -> list[str]:
    """One (mode, setting) batch per mode, PER_BATCH cases from each, covering every outcome seen."""
    rng = random.Random(seed)
    batches: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for case in compare.comparable():
        batches[(case["mode"], case["setting"])].append(case)
    picked: list[str] = []
    for mode in sorted({mode for mode, _ in batches}):
        setting = rng.choice(sorted(s for m, s in batches if m == mode))
        cases = batches[(mode, setting)]
        by_outcome: dict[str, list[str]] = defaultdict(list)
        for case in cases:
            by_outcome[case["claude"]["behavior"]].append(case["id"])
        chosen = {rng.choice(ids) for ids in by_outcome.values()}
        rest = sorted(c["id"] for c in cases if c["id"] not in chosen)
        chosen.update(rng.sample(rest, PER_BATCH - len(chosen)))
        picked.extend(sorted(chosen))
    return picked


class ClaudeOracleLiveTests:
    def test_the_real_cli_still_answers_as_recorded(self) -> None:
        if not os.path.exists(claude_bin()):
            pytest.fail(f"the Claude Code CLI is missing at {claude_bin()}: `make test` installs it")
        problem = _namespace_problem()
        if problem:
            pytest.fail(f"the live oracle sample needs a mount namespace: {problem} (make test runs as root)")
        assert record.claude_version() == compare.CLAUDE_CODE_VERSION
        seed = int(os.environ.get("GATEHOUSE_ORACLE_SEED") or time.time() // 86400)
        ids = sample(seed)
        assert len(ids) >= 30
        recorded = {c["id"]: c["claude"]["behavior"] for c in compare.load()["cases"]}
        live = {c["id"]: c["claude"]["behavior"] for c in record.run_cases(ids)}
        changed = [f"{id}: recorded {recorded[id]}, now {live.get(id)}" for id in ids if live.get(id) != recorded[id]]
        assert not changed, (
            f"Claude Code no longer answers as recorded (GATEHOUSE_ORACLE_SEED={seed}); "
            f"re-record with `{record.RECORD_COMMAND}`:\n" + "\n".join(changed)
        )
