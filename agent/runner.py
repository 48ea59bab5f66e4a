"""`ToolRunner`: the eight stages one `tool_use` block goes through (seed 000, §4.4).

1 lookup → 2 validation (schema, then the tool's own check) → 3 PreToolUse hooks and the
speculative classifier in parallel → 4 permission (hook verdict, a local pre-check of the
rules the agent carries, then Gatehouse) → 5 execution (progress streamed, timeout) →
6 result sizing (big outputs to disk) → 7 PostToolUse / PostToolUseFailure → 8 one
`tool_result` block. Errors are data: every failure becomes a `tool_result` with
``is_error`` and a message the model can act on; nothing raises out of ``run``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import policy
from agent.client import GatehouseClient, GatehouseError, PermissionDecision
from agent.facts import gather
from agent.hooks import Hooks, run_post, run_pre_tool_use
from agent.results import ToolResult, persist_if_large, tool_use_error
from agent.tools import Tool, ToolContext, ToolError, ToolOutput, default_tools
from policy.classifier import classify_readonly
from policy.errors import classify_tool_error
from policy.pipeline.hooks import pre_tool_use as reconcile_hooks
from policy.tools import lookup as policy_lookup

log = logging.getLogger("gatehouse.agent")

Telemetry = Callable[[dict[str, Any]], None]
Classifier = Callable[..., dict[str, Any]]
ProgressListener = Callable[[str, dict[str, Any]], Awaitable[None]]
# What the Gatehouse server stores about a result: enough for the dashboard, not a dump.
REPORTED_OUTPUT_CHARS = 8_000


class StageError(Exception):
    """A stage ended the call; ``result`` is the tool_result that says why."""

    def __init__(self, result: ToolResult) -> None:
        super().__init__(result.content)
        self.result = result


@dataclass
class Call:
    """One `tool_use` block on its way through the stages."""

    tool_use_id: str
    name: str
    raw_input: Any
    tool: Tool | None = None
    tool_input: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    ask_reason: str | None = None
    hook_outputs: list[dict[str, Any]] = field(default_factory=list)
    classifier: dict[str, Any] | None = None
    permission: PermissionDecision | None = None

    def fail(self, stage: str, content: str, **extra: Any) -> StageError:
        return StageError(
            ToolResult(self.tool_use_id, content, True, self.tool.name if self.tool else self.name, stage, **extra)
        )


class ToolRunner:
    """Run `tool_use` blocks through the eight stages, with Gatehouse as the permission stage.

    - ``rules`` are rules the agent carries (the ``policy.decide`` item shape); a local
      deny ends the call without contacting the server; anything else goes to Gatehouse.
    - Without a ``client`` there is nobody to ask: only a local allow runs a tool.
    """

    def __init__(
        self,
        tools: Iterable[Tool] | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        additional_directories: Iterable[str | os.PathLike[str]] = (),
        client: GatehouseClient | None = None,
        rules: list[dict[str, Any]] | None = None,
        mode: str = "default",
        context: str = "interactive",
        session_id: str = "",
        hooks: Hooks | None = None,
        results_dir: str | os.PathLike[str] | None = None,
        permission_timeout: float | None = None,
        on_progress: ProgressListener | None = None,
        telemetry: Telemetry | None = None,
        classifier: Classifier = classify_readonly,
    ) -> None:
        self.tools = list(tools) if tools is not None else default_tools()
        self.context = ToolContext(
            cwd=Path(cwd or os.getcwd()).resolve(),
            additional_directories=tuple(Path(d).resolve() for d in additional_directories),
            session_id=session_id,
        )
        self.results_dir = Path(results_dir) if results_dir else _default_results_dir(session_id)
        # The model must be able to Read a result that was saved to disk, but not change it.
        self.context.read_only_roots = (self.results_dir,)
        self.client = client
        self.rules = policy.compile_rules(rules or [])
        self.mode = mode
        self.context_kind = context
        self.hooks = hooks or Hooks()
        self.permission_timeout = permission_timeout
        self.on_progress = on_progress
        self.telemetry = telemetry
        # Speculative: started with the hooks, its verdict feeds the local pre-check.
        self.classifier = classifier
        self._names, self._deprecated = self._index(self.tools)

    @staticmethod
    def _index(tools: list[Tool]) -> tuple[dict[str, Tool], dict[str, Tool]]:
        names: dict[str, Tool] = {}
        deprecated: dict[str, Tool] = {}
        for tool in tools:
            names[tool.name] = tool
            names.update(dict.fromkeys(tool.aliases, tool))
            deprecated.update(dict.fromkeys(tool.deprecated_aliases, tool))
        return names, deprecated

    async def run_all(self, blocks: Iterable[Mapping[str, Any]]) -> list[ToolResult]:
        """Run one assistant message's blocks; results come back in the blocks' order.

        - Consecutive read-only calls (Read, Glob, Grep, …) run concurrently, as Claude
          Code runs concurrency-safe tools; anything that may write runs alone, in order,
          because later calls may depend on its side effects.
        """
        results: list[ToolResult] = []
        batch: list[Mapping[str, Any]] = []
        for block in blocks:
            if self._read_only(block):
                batch.append(block)
                continue
            results.extend(await asyncio.gather(*(self.run(b) for b in batch)))
            batch = []
            results.append(await self.run(block))
        results.extend(await asyncio.gather(*(self.run(b) for b in batch)))
        return results

    def _read_only(self, block: Mapping[str, Any]) -> bool:
        tool = self._names.get(str(block.get("name"))) or self._deprecated.get(str(block.get("name")))
        return tool is not None and tool.read_only

    async def run(self, block: Mapping[str, Any]) -> ToolResult:
        """Run one `tool_use` block; always return its `tool_result`, never raise."""
        started = time.monotonic()
        call = Call(str(block.get("id") or ""), str(block.get("name") or ""), block.get("input"))
        try:
            result = await self._stages(call)
        except StageError as stop:
            result = stop.result
        except Exception as exc:  # errors are data: the model must get an answer
            log.exception("tool runner failed on %s", call.name)
            result = ToolResult(
                call.tool_use_id,
                tool_use_error(f"Internal error running {call.name}: {exc}"),
                True,
                call.name,
                "internal",
                classify_tool_error(exc),
            )
        result.warnings = call.warnings
        if call.warnings and call.tool is not None:
            result.content = "\n\n".join([result.content, *call.warnings])
        self._record(result, call, time.monotonic() - started)
        return result

    async def _stages(self, call: Call) -> ToolResult:
        call.tool = self._lookup(call)
        call.tool_input = await self._validate(call, call.tool, call.raw_input)
        await self._pre_permission(call)
        await self._permission(call)
        return await self._execute_and_report(call)

    # 1 ---------------------------------------------------------------------------------

    def _lookup(self, call: Call) -> Tool:
        tool = self._names.get(call.name)
        if tool is not None:
            return tool
        tool = self._deprecated.get(call.name)
        if tool is not None:
            call.warnings.append(f"Note: the tool name '{call.name}' is deprecated; use '{tool.name}' instead.")
            return tool
        raise call.fail("lookup", tool_use_error(f"Error: No such tool available: {call.name}"))

    # 2 ---------------------------------------------------------------------------------

    async def _validate(self, call: Call, tool: Tool, raw: Any) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise call.fail("validation", tool_use_error(f"InputValidationError: {tool.name} input must be an object"))
        try:
            model = tool.input_model.model_validate(raw)
        except ValidationError as exc:
            raise call.fail("validation", tool_use_error(_format_validation(tool.name, exc))) from None
        data = model.model_dump(exclude_unset=True)
        check = await tool.validate_input(data, self.context)
        if check.ok:
            return data
        if check.behavior == "ask":
            call.ask_reason = check.message
            return data
        raise call.fail("validation", tool_use_error(check.message), data={"error_code": check.error_code})

    # 3 ---------------------------------------------------------------------------------

    async def _pre_permission(self, call: Call) -> None:
        """Start the PreToolUse hooks and the speculative classifier together (stage 3)."""
        assert call.tool is not None
        (outputs, warnings), verdict = await asyncio.gather(
            run_pre_tool_use(self.hooks, self._hook_event(call, "PreToolUse")),
            asyncio.to_thread(self.classifier, call.tool.name, call.tool_input, cwd=str(self.context.cwd)),
        )
        call.hook_outputs = outputs
        call.classifier = verdict
        call.warnings.extend(warnings)

    # 4 ---------------------------------------------------------------------------------

    async def _permission(self, call: Call) -> None:
        assert call.tool is not None
        outcome = reconcile_hooks(call.hook_outputs)
        if outcome.behavior == "deny":
            why = f": {outcome.message}" if outcome.message else ""
            raise call.fail(
                "hooks",
                f"PreToolUse hook {outcome.hook} denied this tool call{why}",
                permission={"behavior": "deny", "reason": {"type": "hook", "hook": outcome.hook}},
            )
        if outcome.updated_input is not None:
            call.tool_input = await self._validate(call, call.tool, outcome.updated_input)
        local = self._local_check(call)
        if local is not None and local.behavior == "deny":
            raise call.fail(
                "permission",
                local.message or f"Permission to use {call.tool.name} was denied.",
                permission={"behavior": "deny", "reason": local.reason, "local": True},
            )
        if self.client is None:
            if local is not None and local.behavior == "allow" and call.ask_reason is None:
                return
            raise call.fail(
                "permission",
                f"Permission to use {call.tool.name} needs approval, and this agent has no Gatehouse to ask.",
                permission={"behavior": "deny"},
            )
        call.permission = await self._ask_gatehouse(call)
        if not call.permission.allowed:
            raise call.fail(
                "permission",
                call.permission.message or f"Permission to use {call.tool.name} was denied.",
                permission=_describe(call.permission),
                request_id=call.permission.request_id,
            )
        if call.permission.updated_input is not None:
            call.tool_input = await self._validate(call, call.tool, call.permission.updated_input)

    def _local_check(self, call: Call) -> policy.Decision | None:
        """Decide with the rules the agent carries; None when the engine does not know the tool."""
        assert call.tool is not None
        if policy_lookup(call.tool.name).spec is None:
            return None
        return policy.decide(self._engine_doc(call), rules=self.rules)

    def _engine_doc(self, call: Call) -> dict[str, Any]:
        assert call.tool is not None
        directories = self._directories_for(call.tool)
        return {
            "tool_name": call.tool.name,
            "tool_input": call.tool_input,
            "cwd": str(self.context.cwd),
            "additional_directories": directories,
            # The runner is on the agent's machine: the engine decides on this disk's facts.
            "facts": gather(call.tool.name, call.tool_input, str(self.context.cwd), directories),
            "mode": self.mode,
            "context": "interactive",
            "session_id": self.context.session_id,
            "pre_tool_use_hooks": self._hooks_for_engine(call),
            "classifier_verdict": call.classifier,
        }

    def _directories_for(self, tool: Tool) -> list[str]:
        directories = [str(d) for d in self.context.additional_directories]
        if tool.read_only:
            # Reading back a result saved to disk is part of the same work, not a new reach.
            directories.extend(str(d) for d in self.context.read_only_roots)
        return directories

    def _hooks_for_engine(self, call: Call) -> list[dict[str, Any]]:
        outputs = list(call.hook_outputs)
        if call.ask_reason is not None:
            # The tool's own check said "ask": put it to the approver the way a hook ask is.
            outputs.append(
                {
                    "permissionDecision": "ask",
                    "permissionDecisionReason": call.ask_reason,
                    "hook": f"{call.tool.name if call.tool else call.name}.validate_input",
                }
            )
        return outputs

    async def _ask_gatehouse(self, call: Call) -> PermissionDecision:
        assert call.tool is not None and self.client is not None
        request: dict[str, Any] = {
            "tool_name": call.tool.name,
            "tool_input": call.tool_input,
            "tool_use_id": call.tool_use_id or None,
            "session_id": self.context.session_id,
            "cwd": str(self.context.cwd),
            "permission_mode": self.mode,
            "context": self.context_kind,
            "additional_directories": self._directories_for(call.tool),
        }
        # Local hook verdicts stay local: the server refuses agent-supplied hook outputs,
        # since an agent could otherwise approve itself. Gatehouse decides on its own rules.
        if request["tool_use_id"] is None:
            del request["tool_use_id"]
        try:
            return await self.client.request_permission(request, timeout=self.permission_timeout)
        except GatehouseError as exc:
            # Fail closed: no answer from the gateway is never an allow.
            raise call.fail(
                "permission",
                f"Permission to use {call.tool.name} could not be obtained from "
                f"Gatehouse ({exc}), so the call was denied.",
                permission={"behavior": "deny", "reason": {"type": "other", "detail": exc.code}},
            ) from None

    # 5-7 -------------------------------------------------------------------------------

    async def _execute_and_report(self, call: Call) -> ToolResult:
        assert call.tool is not None
        tool = call.tool
        request_id = call.permission.request_id if call.permission else None
        try:
            output = await asyncio.wait_for(
                tool.call(call.tool_input, self.context, self._progress_sink(call, request_id)), tool.timeout_seconds
            )
        except Exception as exc:  # a crashing tool is an error result, not a crash
            message, error_class = _describe_failure(tool, exc)
            await self._report(call, request_id, ok=False, error=message)
            await self._post(call, "PostToolUseFailure", {"error": message})
            return ToolResult(
                call.tool_use_id,
                message,
                True,
                tool.name,
                "execution",
                error_class,
                _describe(call.permission),
                request_id,
            )
        content, path = self._sized(tool, output, call.tool_use_id)
        await self._report(call, request_id, ok=True, output=content[:REPORTED_OUTPUT_CHARS])
        await self._post(call, "PostToolUse", {"tool_response": {"content": output.content, **output.data}})
        return ToolResult(
            call.tool_use_id,
            content,
            False,
            tool.name,
            "result",
            None,
            _describe(call.permission),
            request_id,
            path,
            output.data,
        )

    def _progress_sink(self, call: Call, request_id: str | None) -> Callable[[dict[str, Any]], Awaitable[None]]:
        async def sink(data: dict[str, Any]) -> None:
            if self.client is not None and request_id:
                await self.client.progress(request_id, data)
            if self.on_progress is not None:
                await self.on_progress(call.tool_use_id, data)

        return sink

    def _sized(self, tool: Tool, output: ToolOutput, tool_use_id: str) -> tuple[str, str | None]:
        return persist_if_large(
            output.content,
            limit=tool.max_result_size_chars,
            directory=self.results_dir,
            tool_use_id=tool_use_id or f"{tool.name}-{time.time_ns()}",
        )

    async def _report(
        self, call: Call, request_id: str | None, *, ok: bool, output: Any = None, error: str = ""
    ) -> None:
        if self.client is None or not request_id:
            return
        try:
            await self.client.tool_result(request_id, ok=ok, output=output, error=error)
        except Exception as exc:  # reporting is best effort; the result stands
            log.info("could not report the result of %s: %s", call.tool_use_id, exc)

    async def _post(self, call: Call, event: str, extra: dict[str, Any]) -> None:
        hooks = self.hooks.post_tool_use if event == "PostToolUse" else self.hooks.post_tool_use_failure
        if hooks:
            call.warnings.extend(await run_post(hooks, {**self._hook_event(call, event), **extra}, self.hooks.timeout))

    def _hook_event(self, call: Call, event: str) -> dict[str, Any]:
        return {
            "hook_event_name": event,
            "session_id": self.context.session_id,
            "cwd": str(self.context.cwd),
            "permission_mode": self.mode,
            "tool_name": call.tool.name if call.tool else call.name,
            "tool_input": call.tool_input,
            "tool_use_id": call.tool_use_id,
        }

    def _record(self, result: ToolResult, call: Call, seconds: float) -> None:
        if self.telemetry is None:
            return
        event = {
            "event": "tool_result",
            "tool": result.tool_name,
            "stage": result.stage,
            "is_error": result.is_error,
            "error_class": result.error_class,
            "duration_ms": round(seconds * 1000, 1),
        }
        try:
            self.telemetry(event)
        except Exception:  # telemetry never changes an outcome
            log.exception("telemetry callback failed")


def _default_results_dir(session_id: str) -> Path:
    return Path(tempfile.gettempdir()) / "gatehouse-results" / (session_id or uuid.uuid4().hex)


def _format_validation(tool: str, exc: ValidationError) -> str:
    lines = []
    for error in exc.errors()[:10]:
        where = ".".join(str(p) for p in error["loc"]) or "input"
        lines.append(f"The parameter `{where}` {_explain(error)}")
    return f"InputValidationError: {tool} failed due to the following issue(s):\n" + "\n".join(lines)


def _explain(error: Any) -> str:
    kind = error.get("type", "")
    if kind == "missing":
        return "is required but missing"
    if kind == "extra_forbidden":
        return "is not a valid parameter for this tool"
    return f"is invalid: {error.get('msg', 'bad value')}"


def _describe_failure(tool: Tool, exc: Exception) -> tuple[str, str]:
    if isinstance(exc, TimeoutError):
        return (f"Error: {tool.name} timed out after {tool.timeout_seconds:g}s and was stopped.", "Error:Timeout")
    if isinstance(exc, ToolError):
        return str(exc), classify_tool_error(exc)
    return f"Error: {exc}" if str(exc) else f"Error: {type(exc).__name__}", classify_tool_error(exc)


def _describe(decision: PermissionDecision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    return {
        "behavior": decision.behavior,
        "reason": decision.reason,
        "decided_by": decision.decided_by,
        "surface": decision.surface,
        "message": decision.message,
    }
