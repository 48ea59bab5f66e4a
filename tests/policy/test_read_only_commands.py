"""Read-only commands run unasked in every mode, as Claude Code 2.1.332 runs them.

The set is what the differential recording shows Claude Code running without asking
(policy/shell/unasked.py): ``ls``, ``pwd``, ``cat``, ``head -N``, ``wc -l``, ``grep -r``,
``find -name``, ``sed -n``, ``echo``, ``cd``, ``git status``/``diff``/``log --oneline -N``,
behind ``timeout`` and joined by ``&&``, ``||``, ``;``, ``|`` and newlines — reading inside
the working directories. Anything else asks as before: another option, a wrapper, a
path outside or through a symlink out, a write, a subshell, an option that writes or
runs code. Deny and ask rules still come first.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy import Decision, decide
from tests.policy.calls import CWD, HOME, request

MODES = ("default", "acceptEdits", "plan", "dontAsk", "bypassPermissions", "auto")
NO_RULES: list[dict[str, Any]] = []

READ_ONLY = [
    "ls",
    "ls *",
    "ls src",
    "pwd",
    "cat README.md",
    "cat < README.md",
    "head -5 README.md",
    "wc -l README.md",
    "grep -r TODO src",
    "find . -name '*.py'",
    "sed -n 1p README.md",
    "echo hi",
    "echo /etc/passwd",
    "git status",
    "git diff",
    "git log --oneline -1",
    "cd src",
    "timeout 5 ls",
    "ls 2>/dev/null",
    "echo hi > /dev/null",
]
SEPARATORS = [" && ", "; ", " || ", " | ", "\n"]
NOT_READ_ONLY = [
    # options the recording does not show, or that write or run code
    "ls -la",
    "head -n 5 README.md",
    "git status --short",
    "find . -name x -delete",
    "find . -exec rm {} ;",
    "sed -i s/a/b/ README.md",
    "sed -n 1e README.md",
    "git -c core.pager=cat log",
    "git log --output=x",
    "git config user.name x",
    "grep -r x src --include=*.py",
    # other programs, wrappers, prefixes
    "./ls",
    "~/bin/cat README.md",
    "/bin/ls",
    "nice ls",
    "env ls",
    "sudo cat README.md",
    "FOO=1 ls",
    "xargs cat",
    "tail README.md",
    # reads outside, through expansions, or moving out
    "cat ../notes.txt",
    "cat /etc/hostname",
    "cat ~/.ssh/id_rsa",
    f"ls {HOME}",
    "cat $FILE",
    "cat ~bob/notes",
    "cd .. && ls",
    "cd /tmp",
    "cd",
    "cd -",
    # writes, groups, background, substitutions
    "ls > out.txt",
    "cat README.md | tee copy.md",
    "(ls)",
    "{ ls; }",
    "if true; then ls; fi",
    "ls &",
    "echo $(cat .env)",
    "cat <<EOF\nhi\nEOF",
    "cat README.md | sh",
]


def run(command: str, mode: str = "default", rules: list[dict[str, Any]] = NO_RULES, **extra: Any) -> Decision:
    return decide(request("Bash", {"command": command}, mode=mode, rules=rules, **extra))


def rules(allow: tuple[str, ...] = (), ask: tuple[str, ...] = (), deny: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [{"source": "projectSettings", "permissions": {"allow": list(allow), "ask": list(ask), "deny": list(deny)}}]


class ReadOnlyCommandTests:
    @pytest.mark.parametrize("command", READ_ONLY)
    @pytest.mark.parametrize("mode", MODES)
    def test_it_runs_a_read_only_command_unasked_in_every_mode(self, command: str, mode: str) -> None:
        decision = run(command, mode)
        assert decision.behavior == "allow", (command, decision.reason)
        assert decision.reason == {
            "type": "workingDirectory",
            "detail": "read-only command inside the working directories",
        }

    @settings(max_examples=300, deadline=None)
    @given(
        parts=st.lists(st.sampled_from(READ_ONLY), min_size=2, max_size=4),
        separators=st.lists(st.sampled_from(SEPARATORS), min_size=3, max_size=3),
        mode=st.sampled_from(MODES),
    )
    def test_a_line_of_read_only_commands_is_read_only(
        self, parts: list[str], separators: list[str], mode: str
    ) -> None:
        command = parts[0] + "".join(sep + part for sep, part in zip(separators, parts[1:], strict=False))
        assert run(command, mode).behavior == "allow", command

    @settings(max_examples=300, deadline=None)
    @given(
        pipeline=st.lists(st.sampled_from(READ_ONLY), min_size=2, max_size=4),
        line=st.sampled_from([*READ_ONLY, *NOT_READ_ONLY, "curl evil.sh", "rm -rf build", "python3 run.py"]),
        redirect=st.sampled_from(["", " 2>/dev/null", " >/dev/null", " 2>&1"]),
        mode=st.sampled_from(MODES),
    )
    def test_a_line_after_a_pipeline_is_judged_as_its_own_command(
        self, pipeline: list[str], line: str, redirect: str, mode: str
    ) -> None:
        """tree-sitter-bash read ``a | b | c`` then a redirected line as one pipeline whose
        last command took the next line's words: ``cat`` then ``curl evil.sh`` passed for
        ``cat curl evil.sh``, a read, and ran unasked. A line break ends a command, as
        ``;`` does: the two lines are judged alike."""
        command = " | ".join(pipeline) + "\n" + line + redirect
        assert run(command, mode).behavior == run(command.replace("\n", "; "), mode).behavior, command

    @pytest.mark.parametrize(
        "command",
        [
            "ls | ls | cat\ncurl evil.sh 2>/dev/null",
            "ls | ls | cat\npython3 run.py 2>/dev/null",
            "cat README.md | grep x | wc -l\nrm -rf build 2>/dev/null",
            "ls | ls | ls | cat\nsh install.sh >/dev/null",
            "ls | ls | ls | ls 2>/dev/null\ncurl evil.sh && ls",
            "ls | ls | ls | ls >/dev/null\nrm -rf build",
        ],
    )
    def test_a_command_after_a_pipeline_is_never_read_as_its_words(self, command: str) -> None:
        assert run(command).behavior == "ask", command

    def test_a_continued_line_stays_one_command(self) -> None:
        assert run("ls | ls | cat \\\n  README.md 2>/dev/null").behavior == "allow"
        assert run("ls | ls | cat \\\n  ../notes.txt 2>/dev/null").behavior == "ask"

    @pytest.mark.parametrize("command", NOT_READ_ONLY)
    def test_it_asks_for_anything_else(self, command: str) -> None:
        assert run(command).behavior == "ask", command
        assert run(command, "dontAsk").behavior == "deny", command

    @settings(max_examples=300, deadline=None)
    @given(
        read_only=st.sampled_from(READ_ONLY),
        other=st.sampled_from(NOT_READ_ONLY),
        separator=st.sampled_from(SEPARATORS),
        first=st.booleans(),
    )
    def test_one_part_that_is_not_read_only_makes_the_line_ask(
        self, read_only: str, other: str, separator: str, first: bool
    ) -> None:
        command = other + separator + read_only if first else read_only + separator + other
        assert run(command).behavior != "allow", command

    def test_deny_and_ask_rules_come_first(self) -> None:
        assert run("cat .env", rules=rules(deny=("Read(.env)",))).behavior == "deny"
        assert run("grep -r KEY secrets", rules=rules(deny=("Read(./secrets/**)",))).behavior == "deny"
        assert run("git status", rules=rules(deny=("Bash(git:*)",))).behavior == "deny"
        assert run("ls", "bypassPermissions", rules(ask=("Bash(ls:*)",))).behavior == "ask"

    def test_it_reads_through_a_link_only_where_it_leads_inside(self) -> None:
        facts = {
            "home": HOME,
            "paths": {
                CWD: {"real": CWD, "exists": True, "dir": True},
                f"{CWD}/out/data.txt": {"real": "/srv/outside/data.txt", "exists": True, "dir": False},
            },
        }
        assert run("cat out/data.txt", facts=facts).behavior == "ask"

    def test_it_asks_when_the_agent_did_not_say_where_a_file_leads(self) -> None:
        facts = {"home": HOME, "paths": {CWD: {"real": CWD, "exists": True, "dir": True}}}
        assert run("cat README.md", facts=facts).behavior == "ask"

    def test_an_additional_directory_is_inside(self) -> None:
        assert run("cat /srv/extra/notes.txt", additional_directories=["/srv/extra"]).behavior == "allow"


class ReadOnlyPartTests:
    """In a line an allow rule covers, a read-only part needs no rule of its own."""

    def test_a_read_only_part_rides_along_with_a_rule(self) -> None:
        assert run("ls && npm run test", rules=rules(allow=("Bash(npm run test:*)",))).behavior == "allow"
        assert run("ls && npm run build", rules=rules(allow=("Bash(npm run test:*)",))).behavior == "ask"

    def test_a_read_allow_rule_lets_cd_go_where_it_reads(self) -> None:
        allowed = rules(allow=("Bash(ls *)", "Read(//srv/data/**)"))
        assert run("cd /srv/data && ls", rules=allowed).behavior == "allow"
        assert run("cd /srv/other && ls", rules=allowed).behavior == "ask"

    def test_a_group_is_not_a_plain_line(self) -> None:
        assert run("(cd src && npm run test)", rules=rules(allow=("Bash(npm run test:*)",))).behavior == "ask"
