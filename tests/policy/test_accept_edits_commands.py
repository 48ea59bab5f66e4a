"""acceptEdits runs file commands inside the working directories unasked, as Claude Code 2.1.332.

``mkdir``, ``touch``, ``rm`` (``-r``, ``-f``), ``rmdir``, ``mv``, ``cp``, ``sed -i`` and
output redirects, alone or joined with read-only commands, whose every path — read or
written, as written and where the agent reported it leads — lies in a working directory.
Other modes ask (dontAsk denies); anything else asks in acceptEdits too: ``tee`` (recorded
asking), a path outside or through a symlink out, another option or wrapper, a protected
path or a critical one (safety checks first).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy import Decision, decide
from tests.policy.calls import CWD, HOME, request

NO_RULES: list[dict[str, Any]] = []

FILE_LINES = [
    "mkdir newdir",
    "mkdir a b",
    "touch new.txt",
    "rm build/out.o",
    "rm -rf build",
    "rm -r -f build",
    "rm -f src/app.py",
    "rmdir build",
    "mv build/out.o build/out2.o",
    "cp README.md copy.md",
    "sed -i s/a/b/ docs/guide.md",
    "echo hi > out.txt",
    "echo hi >> logs/out.txt",
    "cat README.md > copy.md",
    "rm *.pyc",
    "timeout 5 touch x",
]
READ_ONLY = ["ls", "cat README.md", "git status", "echo done", "pwd"]
SEPARATORS = [" && ", "; ", "\n", " || "]
STILL_ASKING = [
    "echo x | tee out.txt",
    "rm -rf ../sibling",
    "touch ~/x",
    f"cp README.md {HOME}/copy.md",
    "mv README.md /tmp/README.md",
    "mkdir /srv/other/dir",
    "sed -i -e s/a/b/ docs/guide.md",
    "rm -i build/out.o",
    "chmod +x run.sh",
    "ln -s a b",
    "rm -rf $TARGET_DIR",
    "nice rm build/out.o",
    "sudo rm build/out.o",
    "FOO=1 touch x",
    "(touch x)",
    "touch x &",
    "./rm build/out.o",
    "echo hi > $OUT",
]
SAFETY_ASKS = ["rm -rf .git", "touch .git/x", "echo x > .claude/settings.json", "rm -rf .", "rm -rf ..", "rm -rf *"]


def run(command: str, mode: str, **extra: Any) -> Decision:
    return decide(request("Bash", {"command": command}, mode=mode, rules=NO_RULES, **extra))


class AcceptEditsFileCommandTests:
    @pytest.mark.parametrize("command", FILE_LINES)
    def test_accept_edits_runs_file_commands_in_the_working_directories(self, command: str) -> None:
        decision = run(command, "acceptEdits")
        assert decision.behavior == "allow", (command, decision.reason)
        assert decision.reason["type"] == "mode"

    @pytest.mark.parametrize("command", FILE_LINES)
    def test_other_modes_still_ask(self, command: str) -> None:
        assert run(command, "default").behavior == "ask", command
        assert run(command, "plan").behavior == "ask", command
        assert run(command, "dontAsk").behavior == "deny", command

    @settings(max_examples=200, deadline=None)
    @given(
        parts=st.lists(st.sampled_from(FILE_LINES + READ_ONLY), min_size=2, max_size=4),
        separators=st.lists(st.sampled_from(SEPARATORS), min_size=3, max_size=3),
    )
    def test_a_line_of_them_runs_too(self, parts: list[str], separators: list[str]) -> None:
        command = parts[0] + "".join(sep + part for sep, part in zip(separators, parts[1:], strict=False))
        assert run(command, "acceptEdits").behavior == "allow", command

    @pytest.mark.parametrize("command", STILL_ASKING)
    def test_anything_else_asks_in_accept_edits(self, command: str) -> None:
        assert run(command, "acceptEdits").behavior == "ask", command

    @settings(max_examples=200, deadline=None)
    @given(
        allowed=st.sampled_from(FILE_LINES),
        other=st.sampled_from(STILL_ASKING),
        separator=st.sampled_from(SEPARATORS),
    )
    def test_one_part_that_may_not_run_makes_the_line_ask(self, allowed: str, other: str, separator: str) -> None:
        assert run(allowed + separator + other, "acceptEdits").behavior == "ask"

    @pytest.mark.parametrize("command", SAFETY_ASKS)
    def test_safety_checks_come_first(self, command: str) -> None:
        decision = run(command, "acceptEdits")
        assert (decision.behavior, decision.reason["type"]) == ("ask", "safetyCheck"), command

    def test_an_additional_directory_is_a_working_directory(self) -> None:
        assert run("touch /srv/extra/x", "acceptEdits", additional_directories=["/srv/extra"]).behavior == "allow"

    def test_a_write_through_a_link_out_asks(self) -> None:
        facts = {
            "home": HOME,
            "paths": {
                CWD: {"real": CWD, "exists": True, "dir": True},
                f"{CWD}/out/x": {"real": "/srv/outside/x", "exists": False, "dir": False},
            },
        }
        assert run("touch out/x", "acceptEdits", facts=facts).behavior == "ask"
        assert run("echo hi > out/x", "acceptEdits", facts=facts).behavior == "ask"
