"""Rule wildcards match in bounded work, and agree with the regular expressions they replace.

The references are the old translations: ``*`` as ``.*`` (with Claude Code's optional
word tail for ``prefix:*``) and pathspec's gitignore regex. They backtrack, so they
only ever see small inputs here; the new matchers are also run on the inputs that
made the old ones take seconds, with their work counted in steps, never timed.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from policy import decide
from policy.rules import RuleSyntaxError, compile_rule, parse_rule
from policy.rules.globs import CommandGlob, StepCounter, compile_path_glob
from policy.rules.parse import MAX_RULE_CHARS, MAX_WILDCARDS
from tests.policy.calls import CWD, HOME


def reference_command(pieces: list[str], word_tail: bool) -> re.Pattern[str]:
    pattern = ".*".join(re.escape(p) for p in pieces)
    return re.compile(pattern + (r"(?:\s.*)?" if word_tail else ""), re.DOTALL)


def reference_path(pattern: str) -> re.Pattern[str] | None:
    compiled = GitIgnoreSpecPattern(pattern)
    if compiled.regex is None:
        return None
    # The old matcher's regex, made exact at the end of the text and across newlines,
    # which is how the new one reads paths.
    return re.compile(compiled.regex.pattern.replace("$", r"\Z"), re.DOTALL)


COMMAND_ALPHABET = st.sampled_from(list("ab -:*"))
TEXT_ALPHABET = st.sampled_from(list("ab -:\t\n"))


class CommandGlobTests:
    @settings(max_examples=600, deadline=None)
    @given(
        pieces=st.lists(st.text(st.sampled_from(list("ab -:")), max_size=3), min_size=1, max_size=5),
        word_tail=st.booleans(),
        text=st.text(TEXT_ALPHABET, max_size=12),
    )
    def test_it_agrees_with_the_regex_it_replaces(self, pieces: list[str], word_tail: bool, text: str) -> None:
        glob = CommandGlob(tuple(pieces), word_tail)
        expected = reference_command(pieces, word_tail).fullmatch(text) is not None
        assert glob.fullmatch(text) is expected

    @pytest.mark.parametrize("stars", [8, 12, 20, MAX_WILDCARDS])
    @pytest.mark.parametrize("length", [40, 1000, 200_000])
    def test_it_does_bounded_work_on_the_pathological_rule(self, stars: int, length: int) -> None:
        # ``Bash(a*a*…*c)`` against ``aaaa…``: exponential for a backtracking regex.
        glob = CommandGlob.from_body("*".join(["a"] * stars) + "*c", word_tail=False)
        counter = StepCounter()
        assert glob.fullmatch("a" * length, counter) is False
        assert counter.steps <= stars + 1

    def test_it_tries_each_occurrence_of_the_last_piece_once(self) -> None:
        glob = CommandGlob.from_body("a*a*b", word_tail=True)
        counter = StepCounter()
        text = "a" + "ab" * 5000 + "x"
        assert glob.fullmatch(text, counter) is False
        assert counter.steps <= text.count("b") + 3


PATH_SEGMENT = st.text(st.sampled_from(list("ab.*?")), min_size=1, max_size=4) | st.sampled_from(
    ["**", "*", "[ab]", "[!a]", "a[b-c]"]
)
PATH_PATTERN = st.builds(
    lambda lead, segments, trail: lead + "/".join(segments) + trail,
    st.sampled_from(["", "/"]),
    st.lists(PATH_SEGMENT, min_size=1, max_size=4),
    st.sampled_from(["", "/"]),
)
RELATIVE_PATH = st.lists(st.text(st.sampled_from(list("abc.")), min_size=1, max_size=4), min_size=1, max_size=5).map(
    "/".join
)


class PathGlobTests:
    @settings(max_examples=800, deadline=None)
    @given(pattern=PATH_PATTERN, path=RELATIVE_PATH)
    def test_it_agrees_with_pathspec(self, pattern: str, path: str) -> None:
        reference = reference_path(pattern)
        if reference is None:
            return
        glob = compile_path_glob(pattern, f"Read({pattern})")
        assert glob.match(path) is (reference.match(path) is not None), (pattern, path)

    @pytest.mark.parametrize("pattern", ["a*a*a*a*a*a*a*a*a*a*a*c", "**/a*a*a*a*a*a*a*c/**/x", "/**/**/a*a*a*c"])
    def test_it_does_bounded_work_on_pathological_patterns(self, pattern: str) -> None:
        glob = compile_path_glob(pattern, f"Read({pattern})")
        segments = ["a" * 300] * 40
        counter = StepCounter()
        assert glob.match("/".join(segments), counter) is False
        # Each pattern segment is tried once per path segment, each star once per segment.
        assert counter.steps <= len(segments) * 40


class RuleSizeTests:
    def test_it_rejects_an_over_long_rule_when_parsing(self) -> None:
        with pytest.raises(RuleSyntaxError, match=f"at most {MAX_RULE_CHARS} characters"):
            parse_rule("Bash(" + "a" * MAX_RULE_CHARS + ")")

    @pytest.mark.parametrize("tool", ["Bash", "Read"])
    def test_it_rejects_too_many_wildcards(self, tool: str) -> None:
        with pytest.raises(RuleSyntaxError, match="wildcards"):
            compile_rule(f"{tool}(" + "a*" * (MAX_WILDCARDS + 1) + "c)", "deny", "projectSettings")

    def test_it_decides_the_reported_freeze_at_once(self) -> None:
        # The reported request: 12 wildcards, 40 characters (33 s before); and far longer.
        rule = "Bash(" + "a*" * 12 + "c)"
        for command in ("a" * 40, "a" * 100_000):
            decision = decide(
                {
                    "tool_name": "Bash",
                    "tool_input": {"command": command},
                    "cwd": CWD,
                    "home": HOME,
                    "rules": [{"rule": rule, "behavior": "allow", "source": "projectSettings"}],
                }
            )
            assert decision.behavior == "ask"

    def test_it_reports_an_over_long_rule_in_a_request_as_a_clear_deny(self) -> None:
        decision = decide(
            {
                "tool_name": "Bash",
                "tool_input": {"command": "ls"},
                "cwd": CWD,
                "rules": [{"rule": "Bash(" + "x" * 9000 + ")", "behavior": "allow", "source": "session"}],
            }
        )
        assert decision.behavior == "deny"
        assert "at most" in decision.message
