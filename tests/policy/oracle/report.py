"""Print where ``policy.decide`` and the recording disagree: ``python -m tests.policy.oracle.report``.

One line per case: the case id, both answers, whether Gatehouse is looser, whether the
case is listed in tests/policy/oracle/known.py, and Claude Code's own reason. Filter
with words that must all appear in the line (``report default LOOSER``).
"""

from __future__ import annotations

import sys
from collections import Counter

from tests.policy.oracle import compare
from tests.policy.oracle.known import DELIBERATE, EXPECTED_TO_FIX


def lines() -> list[str]:
    cases = {c["id"]: c for c in compare.load()["cases"]}
    out = []
    for d in compare.disagreements():
        listed = DELIBERATE.get(d.id) or EXPECTED_TO_FIX.get(d.id) or "UNLISTED"
        reason = cases[d.id]["claude"].get("reason") or cases[d.id]["claude"].get("reason_type") or ""
        out.append(f"{d}  [{listed}]  {str(reason)[:100]}")
    return out


def main(argv: list[str]) -> int:
    shown = [line for line in lines() if all(word in line for word in argv)]
    print("\n".join(shown))
    total = len(compare.comparable())
    looser = sum("LOOSER" in line for line in shown)
    print(f"-- {len(shown)} shown of {total} cases; {looser} where Gatehouse is looser")
    print(Counter(line.split("/", 1)[0] for line in shown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
