"""The memoised parse of a command line: keyed by the exact string, shared read-only."""

from __future__ import annotations

import dataclasses

import pytest

from policy.shell import CACHED_COMMAND_CHARS, analyse, parse
from tests.policy.calls import bash

CWD = "/srv/project"


class ParseCacheTests:
    def test_it_returns_the_same_parse_for_the_same_string(self) -> None:
        assert parse("git status") is parse("git status")

    @pytest.mark.parametrize(
        ("first", "second"),
        [
            ("git status", "git status "),
            ("rm x", "rm  x"),
            ("ls a", "ls b"),
            ("echo $(id)", "echo '$(id)'"),
            ("cat x", "cat x\n"),
        ],
    )
    def test_it_never_answers_one_command_with_another_ones_parse(self, first: str, second: str) -> None:
        parse(first)  # cached first, so a leak would show in the second
        assert parse(second).analysis.command == second
        assert parse(second) is not parse(first)
        assert analyse(second, cwd=CWD).command == second

    def test_it_does_not_keep_very_long_commands(self) -> None:
        long = "echo " + "a" * CACHED_COMMAND_CHARS
        assert parse(long) is not parse(long)
        assert parse(long).analysis.commands == parse(long).analysis.commands

    def test_it_shares_only_immutable_values(self) -> None:
        parsed = parse("npm run test -- --watch && ls > out.txt")
        with pytest.raises(dataclasses.FrozenInstanceError):
            parsed.analysis.commands[0].words = ("rm",)  # type: ignore[misc]
        first = parsed.analysis.commands[0]
        for value in (
            parsed.analysis.commands,
            parsed.analysis.blockers,
            parsed.redirect_targets,
            parsed.path_words,
            parsed.suggestions,
            first.words,
            first.deny_forms,
            first.allow_forms,
        ):
            assert isinstance(value, tuple)

    def test_it_is_not_changed_by_a_caller_editing_its_decision(self) -> None:
        first = bash("npm run test")
        first.suggested_rules.append("Bash(rm:*)")
        first.warnings.append("edited")
        second = bash("npm run test")
        assert second.suggested_rules == ["Bash(npm run test:*)"]
        assert "edited" not in second.warnings


class AnalysisPerCallTests:
    def test_it_checks_redirects_against_each_calls_working_directories(self) -> None:
        command = "ls > /data/out.txt"
        assert analyse(command, cwd=CWD).redirects_outside == ("/data/out.txt",)
        inside = analyse(command, cwd=CWD, additional_directories=["/data"])
        assert inside.redirects_outside == ()
        assert analyse(command, cwd=CWD).redirects_outside == ("/data/out.txt",)

    def test_it_checks_path_arguments_against_each_calls_home(self) -> None:
        command = "cat ~/.ssh/id_rsa"
        assert not analyse(command, cwd=CWD, home="/home/a").can_auto_allow
        assert analyse(command, cwd=CWD, home="/home/a").blockers == (
            "it names ~/.ssh/id_rsa: /home/a/.ssh/id_rsa holds credentials",
        )
        assert analyse(command, cwd=CWD, home="/home/b").blockers == (
            "it names ~/.ssh/id_rsa: /home/b/.ssh/id_rsa holds credentials",
        )

    def test_it_withholds_suggestions_when_a_path_check_blocks(self) -> None:
        assert analyse("cat README.md", cwd=CWD).suggested_rules == ("Bash(cat:*)",)
        assert analyse("cat /etc/shadow", cwd=CWD).suggested_rules == ()
        assert analyse("echo x > /etc/y", cwd=CWD).suggested_rules == ()
