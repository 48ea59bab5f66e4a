"""Agent-side hooks: PreToolUse, PostToolUse and PostToolUseFailure, in Claude Code's shapes.

A hook is an async callable that takes the hook input JSON Claude Code would send
(`hook_event_name`, `tool_name`, `tool_input`, `tool_use_id`, `session_id`, `cwd`, …)
and returns a hook output (`{"hookSpecificOutput": {"permissionDecision": …}}` or the
inner object) or None. `command_hook` runs an existing Claude Code hook script the same
way Claude Code does: JSON on stdin, JSON on stdout, exit code 2 blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("gatehouse.agent")

HookOutput = dict[str, Any] | None
Hook = Callable[[dict[str, Any]], Awaitable[HookOutput]]


@dataclass
class Hooks:
    """The hooks one runner calls, per event (the names are Claude Code's, case and all)."""

    pre_tool_use: list[Hook] = field(default_factory=list)
    post_tool_use: list[Hook] = field(default_factory=list)
    post_tool_use_failure: list[Hook] = field(default_factory=list)
    timeout: float = 60.0


def hook_name(hook: Hook, index: int) -> str:
    return str(getattr(hook, "hook_name", None) or getattr(hook, "__name__", None) or f"hook[{index}]")


async def run_pre_tool_use(hooks: Hooks, event: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Run every PreToolUse hook concurrently; return their outputs (named) and warnings.

    - A hook that fails or outlives ``hooks.timeout`` gives no decision, as in Claude Code.
    """
    results = await asyncio.gather(
        *(asyncio.wait_for(hook(dict(event)), hooks.timeout) for hook in hooks.pre_tool_use), return_exceptions=True
    )
    outputs: list[dict[str, Any]] = []
    warnings: list[str] = []
    for index, (hook, result) in enumerate(zip(hooks.pre_tool_use, results, strict=True)):
        name = hook_name(hook, index)
        if isinstance(result, BaseException):
            warnings.append(f"PreToolUse hook {name} failed ({type(result).__name__}); it made no decision.")
        elif isinstance(result, dict):
            inner = result.get("hookSpecificOutput", result)
            if isinstance(inner, dict):
                outputs.append({**inner, "hook": name})
    return outputs, warnings


async def run_post(hooks: list[Hook], event: dict[str, Any], timeout: float) -> list[str]:
    """Run PostToolUse / PostToolUseFailure hooks; their failures are logged, never raised."""
    warnings = []
    for index, hook in enumerate(hooks):
        try:
            await asyncio.wait_for(hook(dict(event)), timeout)
        except Exception as exc:  # a broken hook must not change the tool's result
            warnings.append(f"{event['hook_event_name']} hook {hook_name(hook, index)} failed ({type(exc).__name__}).")
            log.warning("%s", warnings[-1])
    return warnings


def command_hook(command: str, *, timeout: float = 60.0) -> Hook:
    """Wrap a Claude Code hook command: JSON on stdin; stdout JSON; exit 2 blocks with stderr."""

    async def run(event: dict[str, Any]) -> HookOutput:
        process = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(json.dumps(event).encode()), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            raise
        if process.returncode == 2:
            return {"permissionDecision": "deny", "permissionDecisionReason": err.decode(errors="replace").strip()}
        if process.returncode != 0 or not out.strip():
            return None
        try:
            parsed = json.loads(out)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None

    run.hook_name = command  # type: ignore[attr-defined]
    return run
