"""Symlinks are resolved for every decision, from the agent's disk as it is at that moment.

The agent's gatherer (``agent.facts``) reads the disk; the engine reads only its report.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agent.facts import real_path
from bench.fig_hook import link_tree
from policy import Decision, decide
from policy.facts import parse_facts
from policy.paths import PathResolver
from tests.policy.calls import gather


def _tree(tmp_path: Path) -> Path:
    """A project with every kind of link the resolver must agree with realpath on."""
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


def _resolver(project: Path, home: Path, command: str) -> PathResolver:
    facts = parse_facts(gather("Bash", {"command": command}, str(project), [], str(home)))
    return PathResolver(str(project), str(home), facts)


class PathResolverTests:
    def test_it_resolves_from_the_facts_of_each_decision(self, tmp_path: Path) -> None:
        project = _tree(tmp_path)
        first = _resolver(project, tmp_path, "cat out").normalise("out")
        os.symlink(tmp_path / "secret", project / "out")
        # The next decision's facts see the link.
        assert first.real == str(project / "out")
        assert _resolver(project, tmp_path, "cat out").normalise("out").real == str(tmp_path / "secret")

    def test_it_marks_a_path_the_agent_did_not_report_as_unknown(self, tmp_path: Path) -> None:
        project = _tree(tmp_path)
        path = _resolver(project, tmp_path, "ls").normalise("abs/keys/id")
        assert (path.lexical, path.real, path.known) == (str(project / "abs/keys/id"),) * 2 + (False,)

    def test_it_keeps_lexical_and_real_spellings_apart(self, tmp_path: Path) -> None:
        project = _tree(tmp_path)
        path = _resolver(project, tmp_path, "cat ./abs/keys/../keys/id").normalise("./abs/keys/../keys/id")
        assert path.lexical == str(project / "abs" / "keys" / "id")
        assert path.real == str(tmp_path / "secret" / "keys" / "id")


def _decide(project: Path, tool: str, tool_input: dict[str, Any]) -> Decision:
    home = str(project.parent / "home")
    return decide(
        {
            "tool_name": tool,
            "tool_input": tool_input,
            "cwd": str(project),
            "facts": gather(tool, tool_input, str(project), [], home),
            "rules": [
                {"rule": "Bash(cat:*)", "behavior": "allow", "source": "projectSettings"},
                {"rule": "Bash(echo:*)", "behavior": "allow", "source": "projectSettings"},
                {"rule": "Edit(**)", "behavior": "allow", "source": "projectSettings"},
                {"rule": f"Read(/{project.parent}/secret/**)", "behavior": "deny", "source": "policySettings"},
            ],
        }
    )


class FilesystemChangesBetweenDecisionsTests:
    """A command decided before a symlink appeared is decided again afterwards."""

    def test_it_denies_an_operand_that_became_a_link_into_a_denied_place(self, tmp_path: Path) -> None:
        project = _tree(tmp_path)
        assert _decide(project, "Bash", {"command": "cat notes"}).behavior == "allow"
        os.symlink(tmp_path / "secret" / "keys" / "id", project / "notes")
        assert _decide(project, "Bash", {"command": "cat notes"}).behavior == "deny"

    def test_it_asks_for_a_redirect_that_became_a_link_outside_the_project(self, tmp_path: Path) -> None:
        project = _tree(tmp_path)
        command = "echo hi > ./out.txt"
        assert _decide(project, "Bash", {"command": command}).behavior == "allow"
        os.symlink(tmp_path / "elsewhere.txt", project / "out.txt")
        decision = _decide(project, "Bash", {"command": command})
        assert decision.behavior == "ask"
        assert "outside the working directories" in decision.reason["detail"]

    def test_it_sees_a_path_argument_that_became_a_link_to_credentials(self, tmp_path: Path) -> None:
        project = _tree(tmp_path)
        (tmp_path / "home" / ".ssh").mkdir(parents=True)
        command = "cat ./config"
        assert _decide(project, "Bash", {"command": command}).behavior == "allow"
        os.symlink(tmp_path / "home" / ".ssh", project / "config")
        decision = _decide(project, "Bash", {"command": command})
        assert decision.behavior == "ask"
        assert "holds credentials" in decision.reason["detail"]

    def test_it_protects_an_edit_target_that_became_a_link_into_git(self, tmp_path: Path) -> None:
        project = _tree(tmp_path)
        (project / ".git" / "hooks").mkdir(parents=True)
        edit = {"file_path": str(project / "hook"), "content": "#!/bin/sh\n"}
        assert _decide(project, "Write", edit).behavior == "allow"
        os.symlink(project / ".git" / "hooks" / "pre-commit", project / "hook")
        decision = _decide(project, "Write", edit)
        assert decision.behavior == "ask"
        assert decision.reason["type"] == "safetyCheck"
