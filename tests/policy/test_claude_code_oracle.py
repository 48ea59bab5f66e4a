"""``policy.decide`` against Claude Code's own outcomes, recorded with the real CLI.

The recording (tests/policy/oracle/claude-code-<version>.json) holds every case of the
differential suite with what Claude Code 2.1.332 did: allow, ask or deny. Every case must
agree, except the listed ones (tests/policy/oracle/known.py): deliberate deviations, where
Gatehouse is stricter by a documented choice, and known gaps expected to be fixed. Gatehouse
is never looser than Claude Code on an unlisted case, and a deviation may never be looser.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from pathlib import Path

from tests.policy.oracle import compare
from tests.policy.oracle.cases import CALLS, MODES, SETTINGS, case_id
from tests.policy.oracle.known import DELIBERATE, EXPECTED_TO_FIX

DOCS = Path(__file__).resolve().parents[2] / "docs" / "POLICY.md"


class ClaudeCodeOracleTests:
    def test_the_recording_is_of_every_case_and_this_version(self) -> None:
        recording = compare.load()
        assert recording["claude_code"] == compare.CLAUDE_CODE_VERSION
        wanted = {case_id(m, s, c) for m in MODES for s in SETTINGS for c in CALLS}
        recorded = {c["id"] for c in recording["cases"]}
        assert recorded == wanted, (
            f"re-record with `{recording['command']}`: missing {sorted(wanted - recorded)[:5]}, "
            f"stale {sorted(recorded - wanted)[:5]}"
        )
        decided = compare.comparable()
        assert len(decided) >= 0.95 * len(wanted), "Claude Code rejected too many cases as invalid input"
        for mode in MODES:
            assert sum(c["mode"] == mode for c in decided) >= 300, mode

    def test_it_agrees_with_claude_code_on_every_unlisted_case(self) -> None:
        found = compare.disagreements()
        unlisted = [d for d in found if d.id not in DELIBERATE and d.id not in EXPECTED_TO_FIX]
        looser = [d for d in unlisted if d.looser]
        assert not unlisted, (
            f"{len(unlisted)} of {len(compare.comparable())} cases disagree with Claude Code "
            f"({len(looser)} where Gatehouse is looser):\n" + "\n".join(map(str, unlisted[:60]))
        )
        listed = [d for d in found if d.id in EXPECTED_TO_FIX]
        if listed:
            topics = Counter(EXPECTED_TO_FIX[d.id] for d in listed)
            loose = sum(d.looser for d in listed)
            warnings.warn(
                f"{len(listed)} known disagreements with Claude Code expected to be fixed "
                f"({loose} where Gatehouse is looser), by topic: {dict(topics)}",
                stacklevel=1,
            )

    def test_a_deliberate_deviation_is_stricter_than_claude_code(self) -> None:
        found = {d.id: d for d in compare.disagreements()}
        for id in DELIBERATE:
            assert id in found, f"{id} now agrees with Claude Code: remove it from DELIBERATE"
            assert not found[id].looser, f"{found[id]}: a deviation is only ever stricter"
            assert id not in EXPECTED_TO_FIX, id

    def test_a_gap_expected_to_be_fixed_still_disagrees(self) -> None:
        found = {d.id for d in compare.disagreements()}
        fixed = sorted(set(EXPECTED_TO_FIX) - found)
        assert not fixed, f"these now agree with Claude Code: remove them from EXPECTED_TO_FIX: {fixed}"

    def test_every_deviation_is_documented(self) -> None:
        text = DOCS.read_text()
        for key in set(DELIBERATE.values()):
            assert re.search(rf"`{re.escape(key)}`", text), f"docs/POLICY.md does not explain `{key}`"
