"""The agent-side gatherer: what the hook, the SDK client and the CLI report about their disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.facts import MAX_PATHS, command_words, gather, real_path, with_facts
from bench.fig_hook import link_tree
from policy import decide
from policy.facts import parse_facts
from tests.e2e.claude_code.hookrun import ROOT


def _tree(tmp_path: Path) -> Path:
    """A project with every kind of link the gatherer must agree with realpath on."""
    return link_tree(tmp_path)


SPELLINGS = [
    "",
    "src",
    "src/app.py",
    "src/missing/deeper/x",
    "file/below",
    "abs",
    "abs/keys/id",
    "rel/id",
    "chain/keys",
    "loop1",
    "loop1/x",
    "dangling",
    "dangling/x/y",
    "dotdot/app.py",
    "self/self/src",
    "missing",
    "missing/x/y/z",
]


class RealPathTests:
    @pytest.mark.parametrize("spelling", SPELLINGS)
    def test_it_agrees_with_os_path_realpath(self, tmp_path: Path, spelling: str) -> None:
        lexical = os.path.normpath(os.path.join(_tree(tmp_path), spelling))
        assert real_path(lexical) == os.path.realpath(lexical)

    def test_it_agrees_with_realpath_at_the_root_and_outside_any_tree(self) -> None:
        for lexical in ("/", "/nonexistent-top/a/b", "/proc/self/cwd", "/dev/null"):
            assert real_path(lexical) == os.path.realpath(lexical)


class GatherTests:
    @pytest.mark.parametrize("spelling", SPELLINGS)
    def test_it_reports_what_the_disk_says(self, tmp_path: Path, spelling: str) -> None:
        project = _tree(tmp_path)
        facts = gather("Read", {"file_path": spelling or "."}, str(project), home=str(tmp_path))
        lexical = os.path.normpath(os.path.join(project, spelling))
        fact = facts["paths"][lexical]
        assert fact["real"] == os.path.realpath(lexical)
        if spelling.startswith("loop1"):
            assert (fact["exists"], fact["dir"]) == (None, None)  # a loop: the disk cannot say
        else:
            assert (fact["exists"], fact["dir"]) == (os.path.exists(lexical), os.path.isdir(lexical))
        parse_facts(facts)  # always a shape the server accepts

    def test_it_reports_every_path_of_a_call(self, tmp_path: Path) -> None:
        project = _tree(tmp_path)
        facts = gather(
            "Bash",
            {"command": "cat 'abs/keys/id' > out.txt 2>>~/log; tee --output=rel/x"},
            str(project),
            [str(tmp_path / "extra")],
            home=str(tmp_path),
        )
        for path in ("", "abs/keys/id", "out.txt", "rel/x"):
            assert os.path.normpath(os.path.join(project, path)) in facts["paths"]
        assert str(tmp_path / "log") in facts["paths"] and str(tmp_path / "extra") in facts["paths"]
        assert facts["home"] == str(tmp_path) and facts["truncated"] is False

    def test_it_reports_home_variables_as_the_home_they_name(self, tmp_path: Path) -> None:
        facts = gather("Bash", {"command": "rm -rf $HOME/x ${HOME}"}, "/srv", home=str(tmp_path))
        assert {str(tmp_path / "x"), str(tmp_path)} <= set(facts["paths"])

    def test_it_reports_glob_and_grep_roots(self, tmp_path: Path) -> None:
        project = _tree(tmp_path)
        glob = gather("Glob", {"pattern": "../../secret/**", "path": "src"}, str(project), home=str(tmp_path))
        assert {str(project / "src"), str(tmp_path / "secret")} <= set(glob["paths"])
        grep = gather("Grep", {"pattern": "x", "path": "abs"}, str(project), home=str(tmp_path))
        assert grep["paths"][str(project / "abs")]["real"] == str(tmp_path / "secret")

    def test_it_stops_at_its_bounds_and_says_so(self, tmp_path: Path) -> None:
        command = " ".join(f"f{i}" for i in range(MAX_PATHS * 3))
        # A budget no machine spends on this: the path bound alone stops it (under a loaded
        # CI the default 50 ms could be spent before the first path, as the next case is).
        facts = gather("Bash", {"command": command}, str(tmp_path), home=str(tmp_path), budget=60.0)
        assert facts["truncated"] is True
        assert len(facts["paths"]) == MAX_PATHS
        assert parse_facts(facts).truncated
        # Its time budget spent before the first path, it reports none and says so.
        spent = gather("Bash", {"command": "cat a b c"}, str(tmp_path), home=str(tmp_path), budget=-1.0)
        assert spent["truncated"] is True and spent["paths"] == {}
        within = gather("Bash", {"command": "cat a b c"}, str(tmp_path), home=str(tmp_path), budget=60.0)
        assert within["truncated"] is False

    @pytest.mark.parametrize(
        ("command", "expected"),
        [
            ("cat a > b", {"a", "b"}),
            ("echo hi>out.txt", {"out.txt"}),
            ('cat "my file"', {"my file"}),
            ("x=1 ls $HOME/x", {"$HOME/x"}),
            ("cp -r src dst && rm -- tmp", {"src", "dst", "tmp"}),
            ("cat <(ls ./d)", {"./d"}),
            ("git diff --output=changes.diff", {"changes.diff"}),
            ("cat 'unterminated", {"unterminated"}),
        ],
    )
    def test_it_names_every_word_that_could_be_a_path(self, command: str, expected: set[str]) -> None:
        assert expected <= set(command_words(command))


class BodySpliceTests:
    def test_it_adds_facts_to_a_hook_body(self, tmp_path: Path) -> None:
        hook = {"tool_name": "Read", "tool_input": {"file_path": "x"}, "cwd": str(tmp_path)}
        body = with_facts(json.dumps(hook).encode() + b"\n", hook)
        sent = json.loads(body)
        assert sent["tool_input"] == hook["tool_input"]
        assert parse_facts(sent["facts"]).exists(str(tmp_path / "x")) is False

    @pytest.mark.parametrize("body", [b"[]", b"", b'{"facts": 1}', b"{"])
    def test_it_leaves_anything_else_alone(self, body: bytes) -> None:
        hook: dict[str, Any] = {"facts": 1} if b"facts" in body else {}
        assert with_facts(body, hook) == body

    def test_it_escapes_any_path_into_valid_json(self, tmp_path: Path) -> None:
        name = 'q"uote\\back\nline\u2603'
        hook = {"tool_name": "Read", "tool_input": {"file_path": name}, "cwd": str(tmp_path)}
        sent = json.loads(with_facts(json.dumps(hook).encode(), hook))
        assert str(tmp_path / name) in sent["facts"]["paths"]


class DecideCommandTests:
    def test_it_gathers_its_own_facts_when_given_none(self, tmp_path: Path) -> None:
        project = _tree(tmp_path)
        doc = {
            "tool_name": "Edit",
            "tool_input": {"file_path": "src/app.py", "old_string": "x = 1", "new_string": "x = 2"},
            "cwd": str(project),
            "home": str(tmp_path),
            "rules": [{"rule": "Edit(src/**)", "behavior": "allow", "source": "projectSettings"}],
        }
        done = subprocess.run(
            [sys.executable, "-m", "policy", "decide"], input=json.dumps(doc), capture_output=True, text=True, cwd=ROOT
        )
        assert json.loads(done.stdout)["behavior"] == "allow", done.stdout
        # Without facts, the engine alone cannot know the file is really there.
        assert decide(doc).behavior == "ask"
