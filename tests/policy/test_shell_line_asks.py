"""What a ``Bash(…)`` rule does not allow, and writes through a symlink out, as in Claude Code 2.1.332.

- ``&`` (the background operator) and a here-doc with an unquoted delimiter (``<<EOF``:
  the shell expands its body) are never allowed by a content rule: ask; dontAsk denies;
  bypassPermissions and the bare ``Bash`` rule still allow them.
- An output redirect to a file (``echo hi > out.txt``, ``>>``, ``2>``, ``&>``) is not
  allowed by ``Bash(echo:*)`` alone: an Edit allow rule must cover the target, or
  acceptEdits lets the line write inside the working directories. ``/dev/null`` is fine.
- A write whose path lies in a working directory but resolves through a symlink to
  outside them (an Edit, a redirect) asks under any allow rule, the bare ``Edit`` and
  ``Bash`` included, and in acceptEdits; bypassPermissions allows it; dontAsk denies.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy import decide
from tests.policy.calls import CWD, HOME, request

OUTSIDE = "/srv/outside"
ASKING = ("default", "acceptEdits", "plan")

CONTENT_RULES = ["Bash(ls:*)", "Bash(cat:*)", "Bash(echo:*)", "Bash(git status)", "Bash(sleep:*)", "Bash(grep:*)"]


def allowing(*allow: str) -> list[dict[str, Any]]:
    return [{"source": "projectSettings", "permissions": {"allow": list(allow)}}]


def bash(command: str, mode: str = "default", rules: list[dict[str, Any]] | None = None, **extra: Any) -> str:
    doc = request("Bash", {"command": command}, mode=mode, rules=allowing(*CONTENT_RULES) if rules is None else rules)
    doc.update(extra)
    return decide(doc).behavior


BACKGROUND = [
    "ls &",
    "ls -la &",
    "sleep 5 & ls",
    "ls & cat README.md",
    "(ls &)",
    "{ ls & }",
    "git status & echo done",
    "echo start; ls &",
    "ls && cat README.md &",
]
UNQUOTED_HEREDOCS = [
    "cat <<EOF\nhi\nEOF",
    "cat <<EOF\n$HOME\nEOF",
    "cat <<EOF\n`whoami`\nEOF",
    "cat <<-EOF\n\thi\n\tEOF",
    "cat <<END_OF_TEXT\nhi\nEND_OF_TEXT",
    "grep x <<EOF\nx\nEOF",
    "ls && cat <<EOF\nhi\nEOF",
]
QUOTED_HEREDOCS = [
    "cat <<'EOF'\n$HOME `whoami`\nEOF",
    'cat <<"EOF"\nhi\nEOF',
    "cat <<\\EOF\nhi\nEOF",
    "cat <<-'EOF'\n\thi\n\tEOF",
]
REDIRECTS = ["{c} > {t}", "{c} >> {t}", "{c} 2> {t}", "{c} &> {t}", "{c} 1> {t}", "{c} >| {t}", "{c} > {t} 2>&1"]
WRITERS = ["echo hi", "ls -la", "cat README.md", "git status", "grep -rn TODO src"]
INSIDE_TARGETS = ["out.txt", "./logs/out.txt", f"{CWD}/out.txt", "docs/notes.md"]


class BackgroundAndHeredocTests:
    @settings(max_examples=120, deadline=None)
    @given(command=st.sampled_from(BACKGROUND + UNQUOTED_HEREDOCS), mode=st.sampled_from(ASKING))
    def test_a_content_rule_never_allows_them(self, command: str, mode: str) -> None:
        assert bash(command, mode) == "ask", command

    @pytest.mark.parametrize("command", BACKGROUND + UNQUOTED_HEREDOCS)
    def test_dont_ask_denies_and_bypass_and_the_bare_rule_allow(self, command: str) -> None:
        assert bash(command, "dontAsk") == "deny"
        assert bash(command, "bypassPermissions") == "allow"
        assert bash(command, rules=allowing("Bash")) == "allow"

    @pytest.mark.parametrize(
        "command", [*QUOTED_HEREDOCS, "ls && cat README.md", "ls 2>&1 | cat", "ls &>/dev/null", "ls |& cat"]
    )
    def test_it_still_allows_a_quoted_heredoc_and_the_ampersand_operators(self, command: str) -> None:
        assert bash(command) == "allow", command


class OutputRedirectTests:
    @settings(max_examples=200, deadline=None)
    @given(
        shape=st.sampled_from(REDIRECTS),
        writer=st.sampled_from(WRITERS),
        target=st.sampled_from(INSIDE_TARGETS),
        mode=st.sampled_from(("default", "plan")),
    )
    def test_a_content_rule_alone_does_not_allow_writing_a_file(
        self, shape: str, writer: str, target: str, mode: str
    ) -> None:
        command = shape.format(c=writer, t=target)
        assert bash(command, mode) == "ask", command
        assert bash(command, "dontAsk") == "deny", command

    @settings(max_examples=200, deadline=None)
    @given(shape=st.sampled_from(REDIRECTS), writer=st.sampled_from(WRITERS), target=st.sampled_from(INSIDE_TARGETS))
    def test_accept_edits_or_an_edit_rule_lets_it_write(self, shape: str, writer: str, target: str) -> None:
        command = shape.format(c=writer, t=target)
        assert bash(command, "acceptEdits") == "allow", command
        assert bash(command, rules=allowing(*CONTENT_RULES, "Edit(//**)")) == "allow", command
        assert bash(command, rules=allowing("Bash")) == "allow", command

    @pytest.mark.parametrize("command", ["echo hi > out.txt", "ls > logs/a.txt"])
    def test_an_edit_rule_covers_only_its_own_files(self, command: str) -> None:
        assert bash(command, rules=allowing(*CONTENT_RULES, "Edit(./src/**)")) == "ask"
        assert bash("echo hi > src/new.py", rules=allowing(*CONTENT_RULES, "Edit(./src/**)")) == "allow"

    @pytest.mark.parametrize(
        "command", ["echo hi > /dev/null", "ls 2>/dev/null", "ls > /dev/null 2>&1", "git status 2> /dev/stderr"]
    )
    def test_a_redirect_to_a_device_is_no_write(self, command: str) -> None:
        assert bash(command) == "allow", command


# The agent reports that ``out`` in the project is a symlink to /srv/outside.
LINK_FACTS: dict[str, Any] = {
    "home": HOME,
    "paths": {
        CWD: {"real": CWD, "exists": True, "dir": True},
        f"{CWD}/out": {"real": OUTSIDE, "exists": True, "dir": True},
        f"{CWD}/out/x.txt": {"real": f"{OUTSIDE}/x.txt", "exists": False, "dir": False},
        f"{CWD}/out/data.txt": {"real": f"{OUTSIDE}/data.txt", "exists": True, "dir": False},
        f"{CWD}/x": {"real": f"{CWD}/x", "exists": False, "dir": False},
    },
}
ESCAPING_WRITES: list[tuple[str, dict[str, Any]]] = [
    ("Edit", {"file_path": f"{CWD}/out/x.txt", "old_string": "", "new_string": "x"}),
    ("Edit", {"file_path": "out/x.txt", "old_string": "", "new_string": "x"}),
    ("Write", {"file_path": f"{CWD}/out/x.txt", "content": "x"}),
    ("MultiEdit", {"file_path": "out/x.txt", "edits": [{"old_string": "", "new_string": "x"}]}),
    ("Bash", {"command": "echo y > out/x.txt"}),
    ("Bash", {"command": "echo y >> ./out/x.txt"}),
    ("Bash", {"command": "ls 2> out/x.txt"}),
    ("Bash", {"command": "echo y | tee out/x.txt"}),
    ("Bash", {"command": "cp x out/x.txt"}),
]
BARE_RULES = allowing("Bash", "Edit", "Write", "MultiEdit", "Read", "Edit(//**)")


def through_link(tool: str, tool_input: dict[str, Any], mode: str, rules: list[dict[str, Any]] = BARE_RULES) -> str:
    return decide(request(tool, tool_input, mode=mode, rules=rules, facts=LINK_FACTS)).behavior


class SymlinkEscapeTests:
    @pytest.mark.parametrize(("tool", "tool_input"), ESCAPING_WRITES)
    @pytest.mark.parametrize("mode", ASKING)
    def test_no_allow_rule_or_accept_edits_allows_a_write_out_through_a_link(
        self, tool: str, tool_input: dict[str, Any], mode: str
    ) -> None:
        assert through_link(tool, tool_input, mode) == "ask", (tool, tool_input)

    @pytest.mark.parametrize(("tool", "tool_input"), ESCAPING_WRITES)
    def test_dont_ask_denies_and_bypass_allows_it(self, tool: str, tool_input: dict[str, Any]) -> None:
        assert through_link(tool, tool_input, "dontAsk") == "deny"
        assert through_link(tool, tool_input, "bypassPermissions") == "allow"

    def test_the_message_names_where_it_leads(self) -> None:
        edit = {"file_path": "out/x.txt", "old_string": "", "new_string": "x"}
        decision = decide(request("Edit", edit, mode="acceptEdits", rules=BARE_RULES, facts=LINK_FACTS))
        assert f"resolves through a symlink to {OUTSIDE}/x.txt" in decision.message

    @pytest.mark.parametrize(
        ("tool", "tool_input"),
        [
            ("Read", {"file_path": "out/data.txt"}),
            ("Bash", {"command": "cat out/data.txt"}),
            ("Edit", {"file_path": f"{OUTSIDE}/x.txt", "old_string": "", "new_string": "x"}),
            ("Bash", {"command": f"echo y > {OUTSIDE}/x.txt"}),
        ],
    )
    def test_reads_through_it_and_plain_writes_outside_follow_the_rules(
        self, tool: str, tool_input: dict[str, Any]
    ) -> None:
        facts = {**LINK_FACTS, "paths": {**LINK_FACTS["paths"], f"{OUTSIDE}/x.txt": {"real": f"{OUTSIDE}/x.txt"}}}
        assert decide(request(tool, tool_input, rules=BARE_RULES, facts=facts)).behavior == "allow", tool_input

    def test_a_link_into_another_working_directory_is_inside(self) -> None:
        edit = {"file_path": "out/x.txt", "old_string": "", "new_string": "x"}
        doc = request("Edit", edit, mode="acceptEdits", facts=LINK_FACTS, additional_directories=[OUTSIDE])
        assert decide(doc).behavior == "allow"
