"""Lines that make tree-sitter's error recovery quadratic are cut short, never waited out.

Thousands of unclosed ``a=(`` or here-doc starts sent tree-sitter back over its input
again and again: 12 KB took 0.8 s and a 256 KB line would have held a worker thread for
minutes. The parse now stops once it has read far more than a clean parse could need;
what it did parse is still checked against deny rules, and the line never auto-allows.

The budget counts reads, not seconds, so these tests do not depend on the machine's
speed; the timeout only keeps a regression from hanging the suite.
"""

from __future__ import annotations

import pytest

from policy.shell import analyse
from policy.shell.commands import bounded_parse
from tests.policy.calls import bash

pytestmark = pytest.mark.timeout(60)

TOO_CONVOLUTED = "the command is too convoluted to analyse; only its start was checked"

# Each about 250 KB, under the 256 KB the analyser still parses.
QUADRATIC = {
    "unclosed array assignments": "a=(" * 83_000,
    "unterminated here-docs": "<<E\n" * 62_000,
}
# As long, but clean (or failing in ways the parser gets over at once): read once.
LONG_BUT_LINEAR = {
    "a long compound line": "git status && ls -la | grep foo; " * 7_000,
    "many here-docs": "cat <<'EOF'\nhello $x\nEOF\n" * 9_000,
    "one long word": "x" * 250_000,
    "an unterminated quote": "echo 'never closed " + "word " * 45_000,
}


@pytest.mark.parametrize("name", sorted(QUADRATIC))
def test_a_quadratic_parse_is_cut_short_and_blocks_auto_allow(name: str) -> None:
    line = "echo hi; " + QUADRATIC[name]
    _, finished = bounded_parse(line.encode())
    assert not finished
    analysis = analyse(line, cwd="/srv/project")
    assert analysis.parse_error
    assert TOO_CONVOLUTED in analysis.blockers
    assert bash(line).behavior == "ask"  # `echo` is allowed; the rest was never read


@pytest.mark.parametrize("name", sorted(QUADRATIC))
def test_deny_rules_still_see_the_commands_before_the_cut(name: str) -> None:
    decision = bash("rm -rf / ; " + QUADRATIC[name])
    assert decision.behavior == "deny"
    assert decision.reason.get("rule") == "Bash(rm:*)"


@pytest.mark.parametrize("name", sorted(LONG_BUT_LINEAR))
def test_long_lines_that_parse_cleanly_stay_within_the_budget(name: str) -> None:
    line = LONG_BUT_LINEAR[name]
    _, finished = bounded_parse(line.encode())
    assert finished
    assert TOO_CONVOLUTED not in analyse(line, cwd="/srv/project").blockers


def test_words_are_read_whole_after_a_parse_through_the_budget() -> None:
    # Node.text reads the input through the same callback after the parse.
    analysis = analyse("git commit -m 'a message' && ls src", cwd="/srv/project")
    assert [c.words for c in analysis.commands] == [("git", "commit", "-m", "a message"), ("ls", "src")]
    assert bash("git status --short").behavior == "allow"
