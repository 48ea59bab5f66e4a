"""The runner's stages on their own, with no server: what each one decides and returns."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from agent.hooks import Hooks, command_hook
from agent.runner import ToolRunner
from agent.tools import BashTool, InputCheck, Tool, ToolContext, ToolOutput
from agent.tools.base import ProgressCallback
from policy.tools.schemas import BashInput

ALLOW_BASH = [{"rule": "Bash", "behavior": "allow", "source": "session"}]


def block(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_1", "name": name, "input": tool_input}


class EchoTool(Tool):
    """Echoes its input; asks a human when told to."""

    name = "Bash"
    input_model = BashInput
    seen: list[dict[str, Any]]

    def __init__(self) -> None:
        self.seen = []

    async def validate_input(self, tool_input: dict[str, Any], context: ToolContext) -> InputCheck:
        if tool_input["command"] == "unsure":
            return InputCheck.ask("not sure this is wise")
        return InputCheck.passed()

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        self.seen.append(tool_input)
        return ToolOutput(f"ran {tool_input['command']}")


class RunnerStagesTests:
    async def test_it_coerces_input_through_the_schema(self, tmp_path: Path) -> None:
        tool = EchoTool()
        runner = ToolRunner([tool], cwd=tmp_path, rules=ALLOW_BASH)
        result = await runner.run(block("Bash", command="ls", timeout="5000"))
        assert not result.is_error
        assert tool.seen == [{"command": "ls", "timeout": 5000}]

    async def test_it_never_raises_on_a_malformed_block(self, tmp_path: Path) -> None:
        runner = ToolRunner(cwd=tmp_path)
        result = await runner.run({"type": "tool_use", "id": "x", "name": "Bash", "input": "ls"})
        assert result.is_error
        assert result.content == "<tool_use_error>InputValidationError: Bash input must be an object</tool_use_error>"
        nameless = await runner.run({})
        assert nameless.is_error and nameless.stage == "lookup"

    async def test_it_denies_an_ask_when_there_is_nobody_to_ask(self, tmp_path: Path) -> None:
        tool = EchoTool()
        runner = ToolRunner([tool], cwd=tmp_path)
        result = await runner.run(block("Bash", command="make"))
        assert result.is_error and "has no Gatehouse to ask" in result.content and tool.seen == []

    async def test_it_turns_a_validate_input_ask_into_a_prompt_even_under_an_allow_rule(self, tmp_path: Path) -> None:
        tool = EchoTool()
        runner = ToolRunner([tool], cwd=tmp_path, rules=ALLOW_BASH)
        result = await runner.run(block("Bash", command="unsure"))
        assert result.is_error and result.stage == "permission" and tool.seen == []

    async def test_it_starts_hooks_and_the_classifier_together(self, tmp_path: Path) -> None:
        hook_started = threading.Event()
        classifier_started = asyncio.Event()
        loop = asyncio.get_running_loop()

        def classifier(tool_name: str, tool_input: dict[str, Any], **_: Any) -> dict[str, Any]:
            loop.call_soon_threadsafe(classifier_started.set)
            # Only returns if the hook is running at the same time.
            assert hook_started.wait(5), "the hook did not run alongside the classifier"
            return {"name": "test", "behavior": None, "reason": "no opinion"}

        async def hook(event: dict[str, Any]) -> None:
            hook_started.set()
            await asyncio.wait_for(classifier_started.wait(), 5)

        tool = EchoTool()
        runner = ToolRunner(
            [tool], cwd=tmp_path, rules=ALLOW_BASH, classifier=classifier, hooks=Hooks(pre_tool_use=[hook])
        )
        result = await runner.run(block("Bash", command="ls"))
        assert not result.is_error, result.content

    async def test_it_applies_a_hook_rewrite_and_revalidates_it(self, tmp_path: Path) -> None:
        async def rewrite(event: dict[str, Any]) -> dict[str, Any]:
            return {"hookSpecificOutput": {"updatedInput": {"command": "ls -la", "timeout": "1000"}}}

        tool = EchoTool()
        runner = ToolRunner([tool], cwd=tmp_path, rules=ALLOW_BASH, hooks=Hooks(pre_tool_use=[rewrite]))
        result = await runner.run(block("Bash", command="ls"))
        assert result.content == "ran ls -la" and tool.seen == [{"command": "ls -la", "timeout": 1000}]

    async def test_it_lets_a_local_deny_rule_beat_a_hook_allow(self, tmp_path: Path) -> None:
        async def allow_all(event: dict[str, Any]) -> dict[str, Any]:
            return {"permissionDecision": "allow"}

        rules = [{"rule": "Bash(rm:*)", "behavior": "deny", "source": "policySettings"}]
        runner = ToolRunner([EchoTool()], cwd=tmp_path, rules=rules, hooks=Hooks(pre_tool_use=[allow_all]))
        result = await runner.run(block("Bash", command="rm -rf build"))
        assert result.is_error and "Bash(rm:*)" in result.content

    async def test_it_runs_a_claude_code_hook_command_whose_exit_2_blocks(self, tmp_path: Path) -> None:
        script = tmp_path / "hook.py"
        script.write_text(
            "import json, sys\nevent = json.load(sys.stdin)\n"
            "if 'secret' in event['tool_input']['command']:\n"
            "    print('secrets stay put', file=sys.stderr); sys.exit(2)\n"
        )
        hook = command_hook(f"{sys.executable} {script}")
        runner = ToolRunner([EchoTool()], cwd=tmp_path, rules=ALLOW_BASH, hooks=Hooks(pre_tool_use=[hook]))
        blocked = await runner.run(block("Bash", command="cat secret"))
        fine = await runner.run(block("Bash", command="ls"))
        assert blocked.is_error and blocked.content.endswith("denied this tool call: secrets stay put")
        assert fine.content == "ran ls"

    async def test_it_treats_a_failing_hook_as_no_decision(self, tmp_path: Path) -> None:
        async def broken(event: dict[str, Any]) -> None:
            raise OSError("hook server down")

        runner = ToolRunner([EchoTool()], cwd=tmp_path, rules=ALLOW_BASH, hooks=Hooks(pre_tool_use=[broken]))
        result = await runner.run(block("Bash", command="ls"))
        assert not result.is_error
        assert "PreToolUse hook broken failed (OSError); it made no decision." in result.warnings

    async def test_it_calls_post_tool_use_with_the_output(self, tmp_path: Path) -> None:
        events: list[dict[str, Any]] = []

        async def record(event: dict[str, Any]) -> None:
            events.append(event)

        runner = ToolRunner([BashTool()], cwd=tmp_path, rules=ALLOW_BASH, hooks=Hooks(post_tool_use=[record]))
        await runner.run(block("Bash", command="echo hello"))
        assert [(e["hook_event_name"], e["tool_response"]["content"]) for e in events] == [("PostToolUse", "hello")]


class ReadOnlyTool(Tool):
    """Read-only; each call waits until every call of its batch has started."""

    name = "mcp__docs__search"
    input_model = BashInput
    read_only = True

    def __init__(self, expected: int) -> None:
        self.started = 0
        self.expected = expected
        self.all_started = asyncio.Event()

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        self.started += 1
        if self.started == self.expected:
            self.all_started.set()
        await asyncio.wait_for(self.all_started.wait(), 5)
        return ToolOutput(tool_input["command"])


class RunAllTests:
    async def test_it_runs_read_only_calls_together_and_keeps_the_order(self, tmp_path: Path) -> None:
        reader, writer = ReadOnlyTool(expected=2), EchoTool()
        rules = [*ALLOW_BASH, {"rule": "mcp__docs", "behavior": "allow", "source": "session"}]
        runner = ToolRunner([reader, writer], cwd=tmp_path, rules=rules)
        blocks = [
            {"id": "1", "name": "mcp__docs__search", "input": {"command": "a"}},
            {"id": "2", "name": "mcp__docs__search", "input": {"command": "b"}},
            {"id": "3", "name": "Bash", "input": {"command": "write"}},
        ]
        results = await runner.run_all(blocks)
        assert [(r.tool_use_id, r.content, r.is_error) for r in results] == [
            ("1", "a", False),
            ("2", "b", False),
            ("3", "ran write", False),
        ]


class ImportsTests:
    def test_it_keeps_the_sdk_free_of_django(self) -> None:
        code = (
            "import sys, agent.client, agent.runner, agent.tools, agent.claude_sdk; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'approvals', 'relay')]; "
            "assert not bad, bad"
        )
        subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])
