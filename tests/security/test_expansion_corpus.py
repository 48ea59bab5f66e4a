"""Deny rules hold against words the shell expands: ``$HOME``, ``~``, globs, computed names.

``$HOME``, ``${HOME}``, ``~`` and ``~alice`` (the request's home) are resolved, so a
``Read(~/.ssh/**)`` deny denies them outright. Globs and other expansions that could
name a denied file make the call ask in every mode — never allowed, by a rule, a mode
or the classifier. Controls: the same rules still allow harmless globs and ``$HOME``
paths outside the denied place.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policy.calls import bash

MODES = ("default", "acceptEdits", "bypassPermissions", "auto", "plan")
HOME_SPELLINGS = ["~", "$HOME", "${HOME}", '"$HOME"', '"${HOME}"', "~alice", "/home/alice"]
DIR_SPELLINGS = [".ssh", ".ss?", ".s*", ".[s]sh", ".ssh/", "*"]
FILE_SPELLINGS = ["id_rsa", "id_*", "id_rs?", "*", "[i]d_rsa"]
READERS = ["cat", "head -n 5", "tail", "less", "ls -la", "grep -r key", "cat -- "]

REPORTED = [
    ("cat $HOME/.ssh/id_rsa", "deny"),
    ('cat "${HOME}/.ssh/id_rsa"', "deny"),
    ("cat ~/.ss?/id_rsa", "ask"),
    ("cat ~alice/.ssh/id_rsa", "deny"),
    ("cat ~bob/.ssh/id_rsa", "ask"),
    ("r? -rf ~", "ask"),
    ("$X -rf ~", "ask"),
    ("$(echo rm) -rf ~", "ask"),
    ("rm$X -rf /", "ask"),
    ("cat .en?", "ask"),
    ("cat $X", "ask"),
]
CONTROLS = ["ls *.py", "cat src/*.py", "cat $HOME/notes/todo.md", "echo $HOME", "ls ~/notes/*"]


class ExpansionRegressionTests:
    @pytest.mark.parametrize(("command", "expected"), REPORTED)
    @pytest.mark.parametrize("mode", MODES)
    def test_it_never_allows_the_reported_expansions(self, command: str, expected: str, mode: str) -> None:
        decision = bash(command, mode=mode)
        assert decision.behavior == expected, decision.reason

    @pytest.mark.parametrize("command", CONTROLS)
    def test_it_still_allows_harmless_expansions(self, command: str) -> None:
        assert bash(command).behavior == "allow"

    def test_the_classifier_never_answers_a_reserved_word(self) -> None:
        decision = bash("cat ~/.ss?/id_rsa", mode="auto", classifier_verdict={"name": "x", "behavior": "allow"})
        assert decision.behavior == "ask"


class ExpansionCorpusTests:
    @settings(max_examples=400, deadline=None)
    @given(
        home=st.sampled_from(HOME_SPELLINGS),
        directory=st.sampled_from(DIR_SPELLINGS),
        name=st.sampled_from(FILE_SPELLINGS),
        reader=st.sampled_from(READERS),
        mode=st.sampled_from(MODES),
    )
    def test_it_never_allows_a_spelling_of_the_denied_key(
        self, home: str, directory: str, name: str, reader: str, mode: str
    ) -> None:
        # A quoted home stays a word of its own: globs inside quotes are not expanded.
        path = f"{home}/{directory.rstrip('/')}/{name}"
        decision = bash(f"{reader} {path}", mode=mode)
        assert decision.behavior != "allow", (path, decision.reason)
