"""The built-in tools run through the runner: what they do, and what they refuse."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agent.runner import ToolRunner
from agent.tools import ToolContext, ToolError

ALLOW_ALL = [
    {"rule": tool, "behavior": "allow", "source": "session"}
    for tool in ("Bash", "Read", "Write", "Edit", "Glob", "Grep")
]


def block(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{name}", "name": name, "input": tool_input}


@pytest.fixture
def runner(tmp_path: Path) -> ToolRunner:
    work = tmp_path / "work"
    work.mkdir()
    return ToolRunner(cwd=work, rules=ALLOW_ALL, results_dir=tmp_path / "results")


class SandboxTests:
    def test_it_refuses_paths_outside_the_working_directories(self, tmp_path: Path) -> None:
        context = ToolContext(cwd=tmp_path)
        assert context.resolve("a/b.txt") == tmp_path.resolve() / "a/b.txt"
        with pytest.raises(ToolError, match="outside the working directories"):
            context.resolve("../escape.txt")

    def test_it_follows_symlinks_before_deciding(self, tmp_path: Path) -> None:
        (tmp_path / "work").mkdir()
        os.symlink("/etc", tmp_path / "work" / "etc-link")
        context = ToolContext(cwd=tmp_path / "work")
        with pytest.raises(ToolError):
            context.resolve("etc-link/passwd")

    def test_it_lets_additional_directories_in(self, tmp_path: Path) -> None:
        other = tmp_path / "other"
        other.mkdir()
        context = ToolContext(cwd=tmp_path / "work", additional_directories=(other,))
        assert context.resolve(str(other / "x")) == other.resolve() / "x"


class FileToolsTests:
    async def test_it_writes_reads_and_edits_a_file(self, runner: ToolRunner) -> None:
        wrote = await runner.run(block("Write", file_path="src/app.py", content="x = 1\ny = 2\n"))
        read = await runner.run(block("Read", file_path="src/app.py"))
        edited = await runner.run(block("Edit", file_path="src/app.py", old_string="y = 2", new_string="y = 3"))
        assert not wrote.is_error and wrote.content.startswith("File created successfully")
        assert read.content == "     1\tx = 1\n     2\ty = 2"
        assert not edited.is_error
        assert (runner.context.cwd / "src/app.py").read_text() == "x = 1\ny = 3\n"

    async def test_it_refuses_to_edit_a_file_the_model_has_not_read(self, runner: ToolRunner) -> None:
        (runner.context.cwd / "notes.txt").write_text("hello")
        result = await runner.run(block("Edit", file_path="notes.txt", old_string="hello", new_string="bye"))
        overwrite = await runner.run(block("Write", file_path="notes.txt", content="bye"))
        assert result.is_error and "has not been read yet" in result.content
        assert overwrite.is_error and (runner.context.cwd / "notes.txt").read_text() == "hello"

    async def test_it_refuses_an_ambiguous_edit(self, runner: ToolRunner) -> None:
        (runner.context.cwd / "dup.txt").write_text("a a a")
        await runner.run(block("Read", file_path="dup.txt"))
        result = await runner.run(block("Edit", file_path="dup.txt", old_string="a", new_string="b"))
        everywhere = await runner.run(
            block("Edit", file_path="dup.txt", old_string="a", new_string="b", replace_all=True)
        )
        assert result.is_error and "Found 3 matches" in result.content
        assert not everywhere.is_error and (runner.context.cwd / "dup.txt").read_text() == "b b b"

    async def test_it_refuses_to_read_outside_the_sandbox(self, runner: ToolRunner) -> None:
        result = await runner.run(block("Read", file_path="/etc/hostname"))
        assert result.is_error and result.stage == "validation"
        assert "outside the working directories" in result.content


class SearchToolsTests:
    async def test_it_globs_and_greps(self, runner: ToolRunner) -> None:
        cwd = runner.context.cwd
        (cwd / "pkg").mkdir()
        (cwd / "pkg/a.py").write_text("def alpha():\n    return 1\n")
        (cwd / "pkg/b.txt").write_text("ALPHA\n")
        (cwd / ".git").mkdir()
        (cwd / ".git/config").write_text("alpha")
        globbed = await runner.run(block("Glob", pattern="**/*.py"))
        files = await runner.run(block("Grep", pattern="alpha", **{"-i": True}))
        lines = await runner.run(block("Grep", pattern="def \\w+", glob="*.py", output_mode="content"))
        bad = await runner.run(block("Grep", pattern="(unclosed"))
        assert globbed.content == str(cwd / "pkg/a.py")
        assert sorted(files.content.splitlines()) == [str(cwd / "pkg/a.py"), str(cwd / "pkg/b.txt")]
        assert lines.content == f"{cwd / 'pkg/a.py'}:1:def alpha():"
        assert bad.is_error and "Invalid regular expression" in bad.content


class BashToolTests:
    async def test_it_reports_a_failing_command_as_an_error_with_its_output(self, runner: ToolRunner) -> None:
        result = await runner.run(block("Bash", command="echo oops >&2; exit 4"))
        assert result.is_error and result.content == "Exit code 4\noops"
        assert result.error_class == "Error:ExitCode4"

    async def test_it_runs_in_the_working_directory(self, runner: ToolRunner) -> None:
        result = await runner.run(block("Bash", command="pwd"))
        assert result.content == str(runner.context.cwd)


class BashSandboxTests:
    @pytest.fixture(autouse=True)
    def _needs_bubblewrap(self) -> None:
        from agent.tools.bash import sandbox_available

        if not sandbox_available():
            pytest.fail("bubblewrap is missing or cannot create namespaces: `make test` installs Debian's bubblewrap")

    async def test_it_lets_a_command_write_only_inside_the_working_directories(
        self, runner: ToolRunner, tmp_path: Path
    ) -> None:
        # Beside the working directory, under /tmp: the sandbox's /tmp is private, so the
        # write lands in a scratch tmpfs and never on the real disk.
        beside = tmp_path / "beside.txt"
        inside = await runner.run(block("Bash", command="echo hi > inside.txt && cat inside.txt"))
        private = await runner.run(block("Bash", command=f"echo pwned > {beside}"))
        escape = await runner.run(block("Bash", command="echo pwned > /var/tmp/gatehouse-sandbox-probe"))
        home = await runner.run(block("Bash", command="touch ~/.gatehouse-sandbox-probe"))
        assert inside.content == "hi"
        assert not private.is_error and not beside.exists()
        assert escape.is_error and "Read-only file system" in escape.content
        assert not Path("/var/tmp/gatehouse-sandbox-probe").exists()
        assert home.is_error and not Path("~/.gatehouse-sandbox-probe").expanduser().exists()

    async def test_it_refuses_to_leave_the_sandbox_unless_allowed(self, runner: ToolRunner) -> None:
        result = await runner.run(block("Bash", command="ls", dangerouslyDisableSandbox=True))
        assert result.is_error and "does not run commands outside the sandbox" in result.content


class BackgroundShellTests:
    def test_a_shell_is_running_until_its_output_is_read_through_not_only_until_it_exits(self) -> None:
        """The exit is seen before the last output is read (the runner's BashOutput then
        said "completed" without the command's last line)."""
        import asyncio

        from agent.tools.bash import BackgroundShell

        async def scenario() -> list[bool]:
            process = await asyncio.create_subprocess_exec("true")
            await process.wait()
            last_read = asyncio.Event()
            drain = asyncio.create_task(last_read.wait())
            shell = BackgroundShell("bash_t", "true", process, drains=[drain])  # type: ignore[list-item]
            seen = [shell.running]
            last_read.set()
            await drain
            seen.append(shell.running)
            return seen

        assert asyncio.run(scenario()) == [True, False]
