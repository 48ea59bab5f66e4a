"""Read deny rules reach as far as Claude Code 2.1.332's.

- A file a Read deny rule covers cannot be written or edited either (Write, Edit,
  MultiEdit, NotebookEdit: "File is covered by a Read deny rule in your permission
  settings and cannot be edited"): deny in every mode, bypassPermissions included. Read
  *ask* rules do not reach edits.
- A deny of ``X/**`` covers ``X`` itself when it is searched: Glob or Grep with ``path``
  X (``~/.ssh`` under ``Read(~/.ssh/**)``), ``grep -r x X`` and other shell operands.
  A search of an ancestor of X is not denied (Claude Code does not either).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy import Decision, decide
from tests.policy.calls import CWD, HOME, request

MODES = ("default", "acceptEdits", "plan", "dontAsk", "bypassPermissions", "auto")
DENIES = ["Read(.env)", "Read(./secrets/**)", "Read(~/.ssh/**)", "Read(//opt/keys/**)", "Read(*.pem)"]
# Allow rules that would otherwise let every edit and search through.
ALLOWS = ["Edit(//**)", "Read(//**)", "Bash"]
RULES = [{"source": "projectSettings", "permissions": {"deny": DENIES, "allow": ALLOWS}}]

COVERED_FILES = [
    ".env",
    "sub/.env",
    f"{CWD}/.env",
    "secrets/key.txt",
    "./secrets/../secrets/a/b.txt",
    "~/.ssh/config",
    f"{HOME}/.ssh/id_rsa",
    "/opt/keys/k",
    "certs/server.pem",
]
COVERED_NOTEBOOKS = ["secrets/nb.ipynb", "~/.ssh/nb.ipynb", "/opt/keys/a/nb.ipynb"]


def edit_input(tool: str, path: str) -> dict[str, Any]:
    if tool == "Write":
        return {"file_path": path, "content": "x\n"}
    if tool == "Edit":
        return {"file_path": path, "old_string": "", "new_string": "x\n"}
    if tool == "MultiEdit":
        return {"file_path": path, "edits": [{"old_string": "", "new_string": "x\n"}]}
    return {"notebook_path": path, "new_source": "x = 1"}


EDITS = [(tool, path) for tool in ("Write", "Edit", "MultiEdit") for path in COVERED_FILES] + [
    ("NotebookEdit", path) for path in COVERED_NOTEBOOKS
]

# (directory as the call spells it, the rule that covers it)
SEARCHED_DIRS = [
    ("secrets", "Read(./secrets/**)"),
    ("./secrets", "Read(./secrets/**)"),
    ("secrets/", "Read(./secrets/**)"),
    (f"{CWD}/secrets", "Read(./secrets/**)"),
    (f"{CWD}/src/../secrets", "Read(./secrets/**)"),
    ("~/.ssh", "Read(~/.ssh/**)"),
    (f"{HOME}/.ssh", "Read(~/.ssh/**)"),
    ("/opt/keys", "Read(//opt/keys/**)"),
]
SEARCHES = [
    lambda d: ("Glob", {"pattern": "*", "path": d}),
    lambda d: ("Glob", {"pattern": "**/*.txt", "path": d}),
    lambda d: ("Grep", {"pattern": "KEY", "path": d}),
    lambda d: ("Bash", {"command": f"grep -r KEY {d}"}),
    lambda d: ("Bash", {"command": f"rg KEY {d}"}),
    lambda d: ("Bash", {"command": f"ls -la {d}"}),
    lambda d: ("Bash", {"command": f"find {d} -name '*.txt'"}),
    lambda d: ("Bash", {"command": f"echo start && grep -rn KEY {d} | head"}),
]


def run(tool: str, tool_input: dict[str, Any], mode: str, rules: list[dict[str, Any]] | None = None) -> Decision:
    extra: dict[str, Any] = {"mode": mode, "rules": RULES if rules is None else rules}
    if mode == "auto":
        extra["classifier_verdict"] = {"name": "permissive", "behavior": "allow"}
    return decide(request(tool, tool_input, **extra))


def assert_denied_by(decision: Decision, rule: str | None = None) -> None:
    assert decision.behavior == "deny", decision.reason
    assert decision.reason["type"] == "rule", decision.reason
    assert decision.reason["rule"].startswith("Read("), decision.reason
    if rule is not None:
        assert decision.reason["rule"] == rule, decision.reason


class ReadDenyOnEditsTests:
    @pytest.mark.parametrize(("tool", "path"), EDITS)
    def test_it_denies_writing_a_file_a_read_deny_covers_even_in_bypass(self, tool: str, path: str) -> None:
        assert_denied_by(run(tool, edit_input(tool, path), "bypassPermissions"))

    @settings(max_examples=200, deadline=None)
    @given(edit=st.sampled_from(EDITS), mode=st.sampled_from(MODES))
    def test_it_denies_it_in_every_mode(self, edit: tuple[str, str], mode: str) -> None:
        tool, path = edit
        assert_denied_by(run(tool, edit_input(tool, path), mode))

    def test_a_read_ask_rule_does_not_reach_edits(self) -> None:
        rules = [{"source": "projectSettings", "permissions": {"ask": ["Read(./docs/**)"]}}]
        assert run("Write", edit_input("Write", "docs/new.md"), "acceptEdits", rules).behavior == "allow"
        assert run("Read", {"file_path": "docs/new.md"}, "acceptEdits", rules).behavior == "ask"

    @pytest.mark.parametrize("path", ["src/app.py", "secrets.txt", "notes/.envrc.example", "certs/server.pem.txt"])
    def test_it_leaves_files_no_rule_covers_to_the_mode(self, path: str) -> None:
        assert run("Write", edit_input("Write", path), "acceptEdits").behavior == "allow", path


class DeniedDirectorySearchTests:
    @settings(max_examples=300, deadline=None)
    @given(directory=st.sampled_from(SEARCHED_DIRS), search=st.sampled_from(SEARCHES), mode=st.sampled_from(MODES))
    def test_it_denies_searching_the_denied_directory_itself(
        self, directory: tuple[str, str], search: Any, mode: str
    ) -> None:
        spelled, rule = directory
        tool, tool_input = search(spelled)
        assert_denied_by(run(tool, tool_input, mode), rule)

    @pytest.mark.parametrize(
        ("tool", "tool_input"),
        [
            ("Glob", {"pattern": "*.py", "path": CWD}),
            ("Glob", {"pattern": "secrets/**"}),
            ("Grep", {"pattern": "x", "path": f"{CWD}/src"}),
            ("Grep", {"pattern": "x"}),
            ("Bash", {"command": "grep -r x src"}),
            ("Bash", {"command": "ls secrets-old"}),
        ],
    )
    def test_it_does_not_deny_searching_elsewhere_or_an_ancestor(self, tool: str, tool_input: dict[str, Any]) -> None:
        assert run(tool, tool_input, "bypassPermissions").behavior == "allow", tool_input

    def test_a_rule_for_some_files_does_not_deny_the_directory(self) -> None:
        rules = [{"source": "projectSettings", "permissions": {"deny": ["Read(./secrets/*.pem)"]}}]
        assert run("Grep", {"pattern": "x", "path": "secrets"}, "bypassPermissions", rules).behavior == "allow"
        assert run("Grep", {"pattern": "x", "path": "secrets/a.pem"}, "bypassPermissions", rules).behavior == "deny"

    def test_an_edit_deny_does_not_reach_a_shell_search(self) -> None:
        rules = [{"source": "projectSettings", "permissions": {"deny": ["Edit(./docs/**)"], "allow": ["Bash"]}}]
        assert run("Bash", {"command": "grep -r x docs"}, "default", rules).behavior == "allow"
