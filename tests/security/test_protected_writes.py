"""Shell writes into protected paths are never auto-allowed, in any mode.

A redirect, ``tee``, ``cp``, ``mv``, ``ln``, ``install``, ``dd of=``, ``sed -i``,
``touch``, ``mkdir``, ``rm``… into ``.git``, ``.claude`` (but ``.claude/worktrees``),
``.vscode``, shell rc files and the rest of the list asks in every mode, under an
allow rule for the writer and under a whole-tool ``Bash`` allow, and the auto-mode
classifier never answers it. Redirect targets also meet Read/Edit deny rules.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy import decide
from tests.policy.calls import gather

CWD = "/srv/project"
HOME = "/home/alice"

WRITERS = [
    "echo x > {p}",
    "echo x >> {p}",
    "echo x &> {p}",
    "echo x >| {p}",
    "ls src/cfg 1> {p}",
    "echo x | tee {p}",
    "tee -a {p} < /dev/null",
    "cp a {p}",
    "cp -t {p} a",
    "mv a {p}",
    "mv {p} /tmp/x",
    "ln -sf a {p}",
    "install -m 755 a {p}",
    "dd if=a of={p}",
    "sed -i s/a/b/ {p}",
    "sed -i.bak -e s/a/b/ {p}",
    "touch {p}",
    "mkdir -p {p}",
    "rm -f {p}",
    "truncate -s 0 {p}",
    "chmod +x {p}",
    "timeout 5 cp a {p}",
    "true && echo x > {p}",
    # ``--backup[=CONTROL]`` and ``--output-error[=MODE]`` take no next word
    "cp --backup a {p}",
    "tee --output-error {p}",
]
PROTECTED = [
    ".git/config",
    ".git/hooks/pre-commit",
    ".GIT/HOOKS/pre-commit",
    ".git",
    "./.git/../.git/config",
    ".claude/settings.json",
    ".claude/commands/x.md",
    ".vscode/tasks.json",
    ".idea/workspace.xml",
    ".husky/pre-commit",
    "~/.config/git/config",
    ".cargo/config.toml",
    ".devcontainer/devcontainer.json",
    ".yarn/releases/x.cjs",
    ".mvn/jvm.config",
    ".envrc",
    "~/.bash_aliases",
    ".yarnrc.yml",
    ".yarnrc",
    "bunfig.toml",
    ".bazelrc",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    ".lefthook.yaml",
    "gradle/wrapper/gradle-wrapper.properties",
    ".mvn/wrapper/maven-wrapper.properties",
    "pyrightconfig.json",
    "~/.bashrc",
    "$HOME/.zshrc",
    ".gitconfig",
    ".gitmodules",
    "/srv/project/.git/config",
]
MODES = ("default", "acceptEdits", "bypassPermissions", "auto", "plan")


def rules(*allow: str) -> list[dict[str, Any]]:
    return [{"source": "projectSettings", "permissions": {"allow": list(allow)}}]


WRITER_RULES = rules(
    *(
        f"Bash({name}:*)"
        for name in "echo ls tee cp mv ln install dd sed touch mkdir rm truncate chmod timeout true".split()
    )
)
WHOLE_TOOL = rules("Bash")


def bash(command: str, mode: str = "default", rule_set: list[dict[str, Any]] | None = None) -> str:
    doc = {
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "cwd": CWD,
        "home": HOME,
        "mode": mode,
        "rules": WRITER_RULES if rule_set is None else rule_set,
        "classifier_verdict": {"name": "permissive", "behavior": "allow"},
        # What the hook reports from the agent's machine: without it, path-dependent allows ask.
        "facts": gather("Bash", {"command": command}, CWD, [], HOME),
    }
    return decide(doc).behavior


class ProtectedWriteRegressionTests:
    def test_it_asks_for_the_reported_chain(self) -> None:
        allowed = rules("Bash(git status:*)", "Bash(ls:*)", "Edit(./src/**)")
        assert bash("ls src/cfg > .git/config", rule_set=allowed) == "ask"
        assert bash("ls src/cfg > .git/config", mode="bypassPermissions", rule_set=allowed) == "ask"
        assert bash("echo 'x' > .git/hooks/pre-commit", rule_set=rules("Bash(echo:*)")) == "ask"

    def test_it_denies_a_redirect_from_a_denied_file(self) -> None:
        denied = [{"source": "policySettings", "permissions": {"deny": ["Read(.env)"]}}, *rules("Bash(cat:*)")]
        assert bash("cat < .env", rule_set=denied) == "deny"
        assert bash("cat 0< ./.env", rule_set=denied) == "deny"
        assert bash("cat < README.md", rule_set=denied) == "allow"

    def test_it_still_allows_ordinary_writes_and_the_worktrees_exemption(self) -> None:
        assert bash("echo x > out.txt", mode="acceptEdits") == "allow"
        assert bash("echo x > .claude/worktrees/agent-1/notes.md", mode="bypassPermissions") == "allow"
        assert bash("rm -f *.pyc", mode="bypassPermissions") == "allow"

    def test_it_asks_for_a_write_target_that_could_be_protected(self) -> None:
        assert bash("echo x > $TARGET", mode="bypassPermissions") == "ask"
        assert bash("rm -rf .g*", mode="bypassPermissions") == "ask"
        assert (
            bash("git config core.fsmonitor 'sh x'", mode="bypassPermissions", rule_set=rules("Bash(git:*)")) == "ask"
        )

    def test_a_writing_command_is_never_read_only(self) -> None:
        doc = {
            "tool_name": "Bash",
            "tool_input": {"command": "echo hi > out.txt"},
            "cwd": CWD,
            "home": HOME,
            "mode": "auto",
        }
        assert decide(doc).behavior == "ask"


class ProtectedWriteCorpusTests:
    @pytest.mark.parametrize("writer", WRITERS)
    @pytest.mark.parametrize("mode", MODES)
    def test_it_never_allows_a_write_into_git_config(self, writer: str, mode: str) -> None:
        assert bash(writer.format(p=".git/config"), mode) in ("ask", "deny")

    @settings(max_examples=500, deadline=None)
    @given(
        writer=st.sampled_from(WRITERS),
        path=st.sampled_from(PROTECTED),
        mode=st.sampled_from(MODES),
        whole_tool=st.booleans(),
    )
    def test_it_never_allows_a_write_into_a_protected_path(
        self, writer: str, path: str, mode: str, whole_tool: bool
    ) -> None:
        command = writer.format(p=path)
        assert bash(command, mode, WHOLE_TOOL if whole_tool else None) in ("ask", "deny"), command


# (source, directory) pairs whose copy into the directory lands on a protected path.
INTO_PROTECTED = [
    (".bashrc", "~"),
    ("src/.bashrc", "~/"),
    (".zshrc", "$HOME"),
    ("config", ".git"),
    ("hooks/pre-commit", ".git/hooks/"),
    ("settings.json", "./.claude"),
    ("tasks.json", ".vscode"),
]
# Every spelling of "into this directory" cp, mv, ln and install have.
INTO = [
    "cp {s} {d}",
    "cp README.md {s} {d}",
    "cp -b {s} {d}",
    "cp --backup {s} {d}",
    "cp -t {d} {s}",
    "cp {s} -t {d}",
    "cp -t{d} {s}",
    "cp --target-directory {d} {s}",
    "cp --target-directory={d} {s}",
    "cp --target {d} {s}",
    "cp --ta={d} {s}",
    "mv {s} {d}",
    "mv -t {d} {s}",
    "ln -sf {s} {d}",
    "install -m 644 {s} {d}",
]


class CopyIntoADirectoryTests:
    """``cp .bashrc ~`` writes ``~/.bashrc``: the server cannot see whether the destination
    is a directory, so a copy, move, link or install writes both names."""

    @settings(max_examples=300, deadline=None)
    @given(
        pair=st.sampled_from(INTO_PROTECTED),
        writer=st.sampled_from(INTO),
        mode=st.sampled_from(MODES),
        whole_tool=st.booleans(),
    )
    def test_it_never_allows_a_copy_into_a_directory_that_lands_on_a_protected_path(
        self, pair: tuple[str, str], writer: str, mode: str, whole_tool: bool
    ) -> None:
        source, directory = pair
        command = writer.format(s=source, d=directory)
        assert bash(command, mode, WHOLE_TOOL if whole_tool else None) in ("ask", "deny"), command

    @pytest.mark.parametrize("writer", INTO)
    def test_an_edit_deny_rule_meets_the_name_inside_the_directory(self, writer: str) -> None:
        denied = [{"source": "policySettings", "permissions": {"deny": ["Edit(~/notes.txt)"]}}]
        command = writer.format(s="docs/notes.txt", d="~")
        assert bash(command, "bypassPermissions", denied) == "deny", command

    def test_a_copy_inside_the_project_is_still_allowed(self) -> None:
        assert bash("cp README.md src/", mode="acceptEdits") == "allow"
        assert bash("cp -t src README.md", mode="acceptEdits") == "allow"


# (directory change, relative target) pairs that land in a protected path.
CD_INTO_PROTECTED = [
    ("cd .git", "config"),
    ("cd .git/hooks", "pre-commit"),
    ("cd ./.GIT/hooks", "post-checkout"),
    ("pushd .claude", "settings.json"),
    ("cd sub && cd ../.git", "config"),
    ("cd ~", ".bashrc"),
    ("cd", ".zshrc"),
    ("cd $DIR", "anything"),
    ("cd -", "config"),
]


class DirectoryChangeTests:
    @settings(max_examples=300, deadline=None)
    @given(
        change=st.sampled_from(CD_INTO_PROTECTED),
        writer=st.sampled_from(WRITERS),
        joiner=st.sampled_from([" && ", "; ", "\n"]),
        mode=st.sampled_from(MODES),
    )
    def test_it_never_allows_a_write_after_moving_into_a_protected_path(
        self, change: tuple[str, str], writer: str, joiner: str, mode: str
    ) -> None:
        directory, target = change
        command = directory + joiner + writer.format(p=target)
        rule_set = rules(
            "Bash(cd:*)", "Bash(pushd:*)", *(r for item in WRITER_RULES for r in item["permissions"]["allow"])
        )
        assert bash(command, mode, rule_set) in ("ask", "deny"), command

    def test_it_reads_relative_operands_from_where_the_line_moved(self) -> None:
        denied = [{"source": "policySettings", "permissions": {"deny": ["Read(~/.ssh/**)"]}}]
        assert bash("cd ~/.ssh && cat id_rsa", rule_set=denied + rules("Bash(cd:*)", "Bash(cat:*)")) == "deny"
        allowed = rules("Bash(cd:*)", "Bash(echo:*)")
        assert bash("cd src && echo x > out.txt", mode="acceptEdits", rule_set=allowed) == "allow"
