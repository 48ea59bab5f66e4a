"""How far an allow rule reaches, as Claude Code 2.1.332 draws it (tests/policy/oracle records it).

- A bare ``Edit`` allows Edit only, not Write or NotebookEdit; a bare ``Read`` allows Read,
  not Glob or Grep. Content rules (``Edit(src/**)``) cover the whole family.
- A ``Bash(…)`` content rule does not allow a line that names a path outside the working
  directories (read or written) unless a Read (for writes: Edit) allow rule covers it, nor
  one with a ``VAR=`` prefix Claude Code does not strip. The bare ``Bash`` rule still does.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy import Decision, decide
from tests.policy.calls import CWD, HOME, request


def _decide(tool: str, tool_input: dict[str, Any], *allow: str, **extra: Any) -> Decision:
    rules = [{"source": "projectSettings", "permissions": {"allow": list(allow)}}]
    return decide(request(tool, tool_input, rules=rules, **extra))


def _bash(command: str, *allow: str, **extra: Any) -> str:
    return _decide("Bash", {"command": command}, *allow, **extra).behavior


OUTSIDE_READS = [
    ("cat", "cat ../notes.txt"),
    ("cat", "cat ../../etc/hostname"),
    ("cat", "cat /etc/hostname"),
    ("cat", "cat ~/notes.txt"),
    ("cat", "cat $HOME/notes.txt"),
    ("ls", "ls -la ~"),
    ("ls", "ls .."),
    ("head", "head -5 /var/log/syslog"),
    ("grep", "grep -r x /opt"),
    ("cat", f"cat {CWD}/../other/file"),
    ("cat", "cd /tmp && cat x"),
    ("cat", "cd .. && cat notes.txt"),
    ("cat", "cat README.md && cat /etc/passwd"),
]
OUTSIDE_WRITES = [
    ("touch", "touch ~/x"),
    ("touch", "touch /tmp/x"),
    ("cp", "cp README.md /tmp/copy"),
    ("cp", "cp README.md ~/copy"),
    ("mkdir", "mkdir /tmp/d"),
    ("mkdir", "mkdir -p ../sibling/d"),
    ("sed", "sed -i s/a/b/ /tmp/f"),
    ("tee", "tee /tmp/f"),
    ("mv", "mv build.o ../build.o"),
]
INSIDE = [
    ("cat", "cat README.md"),
    ("cat", "cat src/app.py"),
    ("cat", f"cat {CWD}/src/app.py"),
    ("ls", "ls -la src"),
    ("touch", "touch new.txt"),
    ("cp", "cp README.md docs/copy.md"),
    ("mkdir", "mkdir -p build/out"),
    ("cat", "cd src && cat app.py"),
    ("cat", "cat /srv/extra/x"),
]


class BareFileRuleTests:
    @pytest.mark.parametrize(
        ("tool", "tool_input"),
        [
            ("Write", {"file_path": f"{CWD}/new.txt", "content": "x"}),
            ("NotebookEdit", {"notebook_path": f"{CWD}/a.ipynb", "new_source": "x"}),
        ],
    )
    def test_it_does_not_let_a_bare_edit_allow_other_editing_tools(self, tool: str, tool_input: dict[str, Any]) -> None:
        assert _decide(tool, tool_input, "Edit").behavior == "ask"
        assert _decide(tool, tool_input, tool).behavior == "allow"
        assert _decide(tool, tool_input, "Edit(//srv/**)").behavior == "allow"

    def test_a_bare_edit_still_allows_edit(self) -> None:
        edit = {"file_path": f"{CWD}/new.txt", "old_string": "", "new_string": "x"}
        assert _decide("Edit", edit, "Edit").behavior == "allow"

    @pytest.mark.parametrize("tool", ["Glob", "Grep"])
    def test_it_does_not_let_a_bare_read_allow_searches(self, tool: str) -> None:
        search = {"pattern": "x", "path": "/opt/data"}
        assert _decide(tool, search, "Read").behavior == "ask"
        assert _decide(tool, search, tool).behavior == "allow"
        assert _decide(tool, search, "Read(//opt/**)").behavior == "allow"
        assert _decide("Read", {"file_path": "/opt/data/x"}, "Read").behavior == "allow"


class BashContentRuleReachTests:
    @pytest.mark.parametrize(("word", "command"), OUTSIDE_READS + OUTSIDE_WRITES)
    def test_a_content_rule_does_not_reach_outside_the_working_directories(self, word: str, command: str) -> None:
        assert _bash(command, f"Bash({word}:*)", "Bash(cd:*)") == "ask"
        assert _bash(command, "Bash") == "allow"

    @pytest.mark.parametrize(("word", "command"), INSIDE)
    def test_a_content_rule_allows_inside_them(self, word: str, command: str) -> None:
        assert _bash(command, f"Bash({word}:*)", "Bash(cd:*)", additional_directories=["/srv/extra"]) == "allow"

    # (After ``cd``, the agent reports no facts for where the operand lands: that asks.)
    @pytest.mark.parametrize(("word", "command"), [r for r in OUTSIDE_READS if not r[1].startswith("cd ")])
    def test_a_read_allow_rule_lets_it_read_there(self, word: str, command: str) -> None:
        assert _bash(command, f"Bash({word}:*)", "Bash(cd:*)", "Read(//**)") == "allow"

    @pytest.mark.parametrize(("word", "command"), [w for w in OUTSIDE_WRITES if w[0] != "mv"])
    def test_a_write_there_needs_an_edit_allow_rule(self, word: str, command: str) -> None:
        assert _bash(command, f"Bash({word}:*)", "Read(//**)") == "ask"
        assert _bash(command, f"Bash({word}:*)", "Read(//**)", "Edit(//**)") == "allow"

    def test_a_read_rule_covers_the_directory_it_names(self) -> None:
        assert _bash("ls /opt/data", "Bash(ls:*)", "Read(//opt/data/**)") == "allow"
        assert _bash("ls /opt", "Bash(ls:*)", "Read(//opt/data/**)") == "ask"

    def test_a_link_out_of_the_tree_is_outside(self) -> None:
        facts = {
            "home": HOME,
            "paths": {
                CWD: {"real": CWD, "exists": True, "dir": True},
                f"{CWD}/out/data.txt": {"real": "/opt/data.txt", "exists": True, "dir": False},
            },
        }
        assert _bash("cat out/data.txt", "Bash(cat:*)", facts=facts) == "ask"
        assert _bash("cat out/data.txt", "Bash(cat:*)", "Read(//opt/**)", facts=facts) == "allow"


class EnvironmentPrefixTests:
    @pytest.mark.parametrize(
        "prefix",
        ["NODE_ENV=test", "RUST_LOG=debug", "LANG=C", "LC_ALL=en_US.UTF-8", "CI=1 NO_COLOR=1", "TZ=UTC"],
    )
    def test_it_strips_the_variables_claude_code_strips(self, prefix: str) -> None:
        assert _bash(f"{prefix} ls", "Bash(ls:*)") == "allow"

    @pytest.mark.parametrize(
        "prefix",
        [
            "FOO=1",
            "FOO=bar",
            "NODE_ENV=test FOO=1",
            "PAGER=cat",
            "GIT_DIR=/tmp/x",
            "LANG=$(id)",
            "NODE_ENV=$X",
            "LC_ALL=`id`",
        ],
    )
    def test_any_other_prefix_keeps_the_rule_from_matching(self, prefix: str) -> None:
        assert _bash(f"{prefix} ls", "Bash(ls:*)") == "ask"
        if "$" not in prefix and "`" not in prefix:
            assert _bash(f"{prefix} ls", "Bash") == "allow"
