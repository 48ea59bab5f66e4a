"""Bash: run a command in the working directory, streaming its output as it comes.

The command runs in its own process group so a timeout or KillShell ends everything it
started, not just the shell. The permission stage judges what a command means (Gatehouse
analyses every part of it, SPEC §5); the sandbox enforces where it may write: with
bubblewrap (`bwrap`) installed, the whole filesystem is mounted read-only except the
working directories and a private /tmp, so even an approved command cannot write
elsewhere. A shell cannot be confined by inspecting its text alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent.tools.base import InputCheck, ProgressCallback, Tool, ToolContext, ToolError, ToolOutput
from policy.tools.schemas import BashInput, BashOutputInput, KillShellInput

DEFAULT_TIMEOUT_MS = 120_000
_ids = itertools.count(1)


@dataclass
class BackgroundShell:
    """A running command whose output is still being collected."""

    id: str
    command: str
    process: asyncio.subprocess.Process
    chunks: list[str] = field(default_factory=list)
    drains: list[asyncio.Task[None]] = field(default_factory=list)
    read_upto: int = 0

    @property
    def output(self) -> str:
        return "".join(self.chunks)

    @property
    def running(self) -> bool:
        """Until the command has exited and all it printed has been read: the exit can be
        seen before the last of its output, which a read then would leave out."""
        return self.process.returncode is None or not all(drain.done() for drain in self.drains)

    def kill(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)


async def _drain(
    stream: asyncio.StreamReader, name: str, shell: BackgroundShell, on_progress: ProgressCallback
) -> None:
    while chunk := await stream.read(4096):
        text = chunk.decode("utf-8", errors="replace")
        shell.chunks.append(text)
        try:
            await on_progress({"stream": name, "text": text})
        except Exception:  # noqa: S110 - progress is best effort; output is kept anyway
            pass


@functools.cache
def sandbox_available() -> bool:
    """Whether bubblewrap is installed and allowed to make namespaces here (probed once)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "true"], capture_output=True, timeout=10, check=False)
    return probe.returncode == 0


def sandbox_prefix(roots: tuple[Path, ...], cwd: Path) -> list[str]:
    """bwrap arguments: everything read-only, a private /tmp, the working directories writable."""
    # A mount point inside the sandbox (a fresh tmpfs), not a temporary file of ours.
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]  # noqa: S108
    for root in roots:
        # After the /tmp tmpfs, so a working directory under /tmp is still the real one.
        real = os.path.realpath(root)
        argv += ["--bind", real, real]
    return [*argv, "--chdir", os.path.realpath(cwd), "--die-with-parent"]


class BashTool(Tool):
    """Run a shell command; ``run_in_background`` moves a long one to the background."""

    name = "Bash"
    input_model = BashInput
    timeout_seconds = 610.0  # the command's own timeout (≤ 600 s) is what normally fires

    def __init__(
        self,
        *,
        background_after: float = 15.0,
        shell: str = "/bin/bash",
        sandbox: Literal["auto", "on", "off"] = "auto",
        allow_unsandboxed: bool = False,
    ) -> None:
        # Seconds a run_in_background command runs in the foreground before it is detached.
        self.background_after = background_after
        self.shell = shell
        # "auto": sandbox when bubblewrap works here; "on": refuse to run without it.
        self.sandbox = sandbox
        # Whether the model may ask for `dangerouslyDisableSandbox: true`.
        self.allow_unsandboxed = allow_unsandboxed

    async def validate_input(self, tool_input: dict[str, Any], context: ToolContext) -> InputCheck:
        if not tool_input["command"].strip():
            return InputCheck.reject("command must not be empty.", 1)
        if tool_input.get("dangerouslyDisableSandbox") and not self.allow_unsandboxed:
            return InputCheck.reject(
                "This agent does not run commands outside the sandbox; "
                "drop dangerouslyDisableSandbox and work inside the working directories.",
                10,
            )
        if self.sandbox == "on" and not sandbox_available():
            return InputCheck.reject("The command sandbox (bubblewrap) is not available on this machine.", 11)
        return InputCheck.passed()

    def _argv(self, command: str, context: ToolContext, unsandboxed: bool) -> list[str]:
        if self.sandbox == "off" or unsandboxed or not sandbox_available():
            return [self.shell, "-c", command]
        return [*sandbox_prefix(context.roots, context.cwd), self.shell, "-c", command]

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        unsandboxed = bool(tool_input.get("dangerouslyDisableSandbox")) and self.allow_unsandboxed
        process = await asyncio.create_subprocess_exec(
            *self._argv(tool_input["command"], context, unsandboxed),
            cwd=context.cwd,
            env={**os.environ, **context.env},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        shell = BackgroundShell(f"bash_{next(_ids)}", tool_input["command"], process)
        assert process.stdout is not None and process.stderr is not None
        shell.drains = [
            asyncio.create_task(_drain(process.stdout, "stdout", shell, on_progress)),
            asyncio.create_task(_drain(process.stderr, "stderr", shell, on_progress)),
        ]
        timeout = (tool_input.get("timeout") or DEFAULT_TIMEOUT_MS) / 1000
        background = bool(tool_input.get("run_in_background"))
        limit = min(timeout, self.background_after) if background else timeout
        try:
            await asyncio.wait_for(asyncio.shield(self._finish(shell)), timeout=limit)
        except TimeoutError:
            if background:
                return self._detach(shell, context)
            shell.kill()
            await self._finish(shell)
            raise ToolError(
                f"Command timed out after {timeout:g}s and was killed.\n{shell.output}".rstrip(), "Error:Timeout"
            ) from None
        except asyncio.CancelledError:
            shell.kill()
            raise
        return self._result(shell)

    async def _finish(self, shell: BackgroundShell) -> None:
        await asyncio.gather(*shell.drains)
        await shell.process.wait()

    def _detach(self, shell: BackgroundShell, context: ToolContext) -> ToolOutput:
        context.background[shell.id] = shell
        shell.read_upto = len(shell.output)
        text = (
            f"Command is still running after {self.background_after:g}s and was moved to the background "
            f"with ID: {shell.id}. Use BashOutput with bash_id={shell.id!r} to read its output, "
            f"KillShell to stop it.\nOutput so far:\n{shell.output}"
        )
        return ToolOutput(text.rstrip(), {"background_id": shell.id, "backgrounded": True})

    def _result(self, shell: BackgroundShell) -> ToolOutput:
        code = shell.process.returncode
        if code != 0:
            raise ToolError(f"Exit code {code}\n{shell.output}".rstrip(), f"Error:ExitCode{code}")
        return ToolOutput(shell.output.rstrip("\n") or "(no output)", {"exit_code": 0})


class BashOutputTool(Tool):
    """Read what a background command printed since the last read."""

    name = "BashOutput"
    input_model = BashOutputInput
    read_only = True

    async def validate_input(self, tool_input: dict[str, Any], context: ToolContext) -> InputCheck:
        if tool_input["bash_id"] not in context.background:
            return InputCheck.reject(f"No background shell with ID {tool_input['bash_id']}", 3)
        return InputCheck.passed()

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        shell: BackgroundShell = context.background[tool_input["bash_id"]]
        output = shell.output
        fresh, shell.read_upto = output[shell.read_upto :], len(output)
        status = "running" if shell.running else f"completed (exit code {shell.process.returncode})"
        return ToolOutput(
            f"<status>{status}</status>\n{fresh}".rstrip(),
            {
                "status": "running" if shell.running else "completed",
                "exit_code": shell.process.returncode,
            },
        )


class KillShellTool(Tool):
    """Stop a background command."""

    name = "KillShell"
    input_model = KillShellInput
    # Older models still call it by its old name; it works and they are told the new one.
    deprecated_aliases = ("KillBash",)

    async def validate_input(self, tool_input: dict[str, Any], context: ToolContext) -> InputCheck:
        if tool_input["shell_id"] not in context.background:
            return InputCheck.reject(f"No background shell with ID {tool_input['shell_id']}", 3)
        return InputCheck.passed()

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        shell: BackgroundShell = context.background[tool_input["shell_id"]]
        shell.kill()
        await asyncio.gather(*shell.drains, return_exceptions=True)
        await shell.process.wait()
        return ToolOutput(f"Killed background shell {shell.id}.", {"exit_code": shell.process.returncode})
