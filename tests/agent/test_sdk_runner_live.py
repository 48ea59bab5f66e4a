"""Every path of one tool_use block through `ToolRunner`, with a real Gatehouse deciding.

Each test ends in the tool_result the model would read, and checks the side effect
(or its absence) and what the server recorded.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from agent.client import GatehouseClient
from agent.hooks import Hooks
from agent.runner import ToolRunner
from agent.tools import BashOutputTool, BashTool, ReadTool, Tool, ToolContext, ToolOutput
from agent.tools.base import ProgressCallback
from policy.tools.schemas import McpInput
from tests.agent.sdk_support import (
    Approver,
    add_rule,
    approver_token,
    audit_rows,
    gatehouse,
    in_db,
    requests_for,
    stored_result,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(90)]
__all__ = ["approver_token", "gatehouse"]  # fixtures, imported for pytest


class ExplodingTool(Tool):
    """An MCP-style tool whose implementation crashes."""

    name = "mcp__demo__explode"
    input_model = McpInput

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        raise RuntimeError("kaboom in /secret/path")


class SlowTool(Tool):
    """An MCP-style tool that never finishes on its own."""

    name = "mcp__demo__slow"
    input_model = McpInput
    timeout_seconds = 0.5

    async def call(self, tool_input: dict[str, Any], context: ToolContext, on_progress: ProgressCallback) -> ToolOutput:
        await asyncio.Event().wait()
        return ToolOutput("unreachable")


def block(tool_use_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


class RunnerAgainstGatehouseTests:
    async def _runner(
        self, server: Any, token: str, workdir: Path, **options: Any
    ) -> tuple[ToolRunner, GatehouseClient]:
        client = GatehouseClient(server.url, token)
        await client.start()
        tools = options.pop("tools", None)
        runner = ToolRunner(
            tools, cwd=workdir, client=client, session_id="sess-1", results_dir=workdir.parent / "results", **options
        )
        return runner, client

    async def test_it_answers_a_hallucinated_tool_with_an_error_and_asks_nobody(
        self, gatehouse: Any, ci_bot: Any, workdir: Path
    ) -> None:
        runner, client = await self._runner(gatehouse, ci_bot.token, workdir)
        async with client:
            result = await runner.run(block("toolu_ghost", "TeleportFiles", where="mars"))
        assert result.block() == {
            "type": "tool_result",
            "tool_use_id": "toolu_ghost",
            "is_error": True,
            "content": "<tool_use_error>Error: No such tool available: TeleportFiles</tool_use_error>",
        }
        assert await in_db(requests_for)("toolu_ghost") == []

    async def test_it_answers_bad_input_with_a_tool_use_error(self, gatehouse: Any, ci_bot: Any, workdir: Path) -> None:
        runner, client = await self._runner(gatehouse, ci_bot.token, workdir)
        async with client:
            result = await runner.run(block("toolu_bad", "Bash", cmd="ls"))
        assert result.is_error and result.stage == "validation"
        assert result.content.startswith("<tool_use_error>InputValidationError: Bash failed")
        assert "`command` is required but missing" in result.content
        assert "`cmd` is not a valid parameter" in result.content
        assert await in_db(requests_for)("toolu_bad") == []

    async def test_it_stops_at_a_hook_deny_without_reaching_the_server(
        self, gatehouse: Any, ci_bot: Any, workdir: Path
    ) -> None:
        async def no_network(event: dict[str, Any]) -> dict[str, Any] | None:
            if "curl" in event["tool_input"].get("command", ""):
                return {
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": "deny",
                        "permissionDecisionReason": "no network from CI",
                    }
                }
            return None

        runner, client = await self._runner(gatehouse, ci_bot.token, workdir, hooks=Hooks(pre_tool_use=[no_network]))
        async with client:
            result = await runner.run(block("toolu_hook", "Bash", command="curl https://example.com > out"))
        assert result.is_error and result.stage == "hooks"
        assert result.content == "PreToolUse hook no_network denied this tool call: no network from CI"
        assert not (workdir / "out").exists()
        assert await in_db(requests_for)("toolu_hook") == []

    async def test_it_reports_a_server_rule_deny_and_runs_nothing(
        self, gatehouse: Any, ci_bot: Any, workdir: Path
    ) -> None:
        await in_db(add_rule)("Bash(touch:*)", "deny")
        runner, client = await self._runner(gatehouse, ci_bot.token, workdir)
        async with client:
            result = await runner.run(block("toolu_rule", "Bash", command="touch marker"))
        assert result.is_error and result.stage == "permission"
        assert "Bash(touch:*)" in result.content
        assert result.permission and result.permission["reason"]["type"] == "rule"
        assert not (workdir / "marker").exists()
        rows = await in_db(audit_rows)(request__tool_use_id="toolu_rule")
        assert [(r.behavior, r.reason["type"]) for r in rows] == [("deny", "rule")]

    async def test_it_denies_locally_on_a_rule_the_agent_carries(
        self, gatehouse: Any, ci_bot: Any, workdir: Path
    ) -> None:
        rules = [{"rule": "Bash(rm:*)", "behavior": "deny", "source": "localSettings"}]
        runner, client = await self._runner(gatehouse, ci_bot.token, workdir, rules=rules)
        (workdir / "keep").write_text("x")
        async with client:
            result = await runner.run(block("toolu_local", "Bash", command="rm keep"))
        assert result.is_error and result.permission and result.permission["local"] is True
        assert "Bash(rm:*)" in result.content
        assert (workdir / "keep").exists()
        assert await in_db(requests_for)("toolu_local") == []

    async def test_it_runs_after_a_human_allows_the_ask_and_streams_progress(
        self, gatehouse: Any, ci_bot: Any, approver_token: str, workdir: Path
    ) -> None:
        seen: list[dict[str, Any]] = []

        async def watch(tool_use_id: str, data: dict[str, Any]) -> None:
            seen.append(data)

        runner, client = await self._runner(gatehouse, ci_bot.token, workdir, on_progress=watch)
        approver = Approver(gatehouse.url, approver_token)
        async with client:
            task = asyncio.create_task(runner.run(block("toolu_ask", "Bash", command="touch marker && echo made it")))
            row = await approver.answer("toolu_ask", "allow")
            result = await asyncio.wait_for(task, 30)
        await approver.aclose()
        assert result.block() == {"type": "tool_result", "tool_use_id": "toolu_ask", "content": "made it"}
        assert (workdir / "marker").exists()
        assert result.request_id == row["id"]
        assert result.permission and result.permission["decided_by"] == "alice"
        assert {"stream": "stdout", "text": "made it\n"} in seen
        assert await stored_result("toolu_ask") == {"ok": True, "output": "made it"}

    async def test_it_returns_the_approvers_message_when_a_human_denies(
        self, gatehouse: Any, ci_bot: Any, approver_token: str, workdir: Path
    ) -> None:
        runner, client = await self._runner(gatehouse, ci_bot.token, workdir)
        approver = Approver(gatehouse.url, approver_token)
        async with client:
            task = asyncio.create_task(runner.run(block("toolu_no", "Bash", command="touch marker")))
            await approver.answer("toolu_no", "deny", "use the build script instead")
            result = await asyncio.wait_for(task, 30)
        await approver.aclose()
        assert result.is_error and "use the build script instead" in result.content
        assert not (workdir / "marker").exists()

    async def test_it_turns_a_crashing_tool_into_an_error_result_and_tells_the_hooks(
        self, gatehouse: Any, ci_bot: Any, workdir: Path
    ) -> None:
        await in_db(add_rule)("mcp__demo", "allow")
        failures: list[dict[str, Any]] = []

        async def on_failure(event: dict[str, Any]) -> None:
            failures.append(event)

        telemetry: list[dict[str, Any]] = []
        runner, client = await self._runner(
            gatehouse,
            ci_bot.token,
            workdir,
            tools=[ExplodingTool()],
            telemetry=telemetry.append,
            hooks=Hooks(post_tool_use_failure=[on_failure]),
        )
        async with client:
            result = await runner.run(block("toolu_boom", "mcp__demo__explode", x=1))
        assert result.block() == {
            "type": "tool_result",
            "tool_use_id": "toolu_boom",
            "is_error": True,
            "content": "Error: kaboom in /secret/path",
        }
        assert result.error_class == "RuntimeError"
        assert [f["hook_event_name"] for f in failures] == ["PostToolUseFailure"]
        assert failures[0]["error"] == "Error: kaboom in /secret/path"
        # Telemetry names the class, never the path in the message.
        assert telemetry[0]["error_class"] == "RuntimeError" and "secret" not in str(telemetry)
        assert await stored_result("toolu_boom") == {"ok": False, "error": "Error: kaboom in /secret/path"}

    async def test_it_stops_a_tool_at_its_timeout(self, gatehouse: Any, ci_bot: Any, workdir: Path) -> None:
        await in_db(add_rule)("mcp__demo", "allow")
        await in_db(add_rule)("Bash(sleep:*)", "allow")
        runner, client = await self._runner(gatehouse, ci_bot.token, workdir, tools=[SlowTool(), BashTool()])
        async with client:
            slow = await runner.run(block("toolu_slow", "mcp__demo__slow"))
            started = time.monotonic()
            sleepy = await runner.run(block("toolu_sleep", "Bash", command="sleep 30", timeout=500))
        assert slow.is_error and slow.content == "Error: mcp__demo__slow timed out after 0.5s and was stopped."
        assert slow.error_class == "Error:Timeout"
        assert sleepy.is_error and sleepy.content.startswith("Command timed out after 0.5s")
        assert time.monotonic() - started < 10

    async def test_it_saves_a_huge_output_to_disk_and_shows_a_preview(
        self, gatehouse: Any, ci_bot: Any, workdir: Path
    ) -> None:
        await in_db(add_rule)("Bash(seq:*)", "allow")
        runner, client = await self._runner(gatehouse, ci_bot.token, workdir)
        async with client:
            result = await runner.run(block("toolu_big", "Bash", command="seq 1 100000"))
            assert not result.is_error and result.persisted_path
            # The model can read the saved file back with the Read tool, slice by slice.
            read = block("toolu_read", "Read", file_path=result.persisted_path, offset=99999, limit=2)
            again = await runner.run(read)
        saved = Path(result.persisted_path).read_text()
        assert saved.splitlines() == [str(n) for n in range(1, 100001)]
        assert result.content.startswith("<persisted-output>\nOutput too large (588894 characters).")
        assert f"Full output saved to: {result.persisted_path}" in result.content
        assert len(result.content) < 2500
        assert again.content == " 99999\t99999\n100000\t100000"

    async def test_it_switches_a_long_command_to_the_background(
        self, gatehouse: Any, ci_bot: Any, workdir: Path
    ) -> None:
        await in_db(add_rule)("Bash", "allow")
        await in_db(add_rule)("BashOutput", "allow")
        tools = [BashTool(background_after=0.5), BashOutputTool(), ReadTool()]
        runner, client = await self._runner(gatehouse, ci_bot.token, workdir, tools=tools)
        async with client:
            result = await runner.run(
                block("toolu_bg", "Bash", command="echo started; sleep 1.5; echo finished", run_in_background=True)
            )
            # The result came back while the command was still running: "finished" is not in it.
            assert not result.is_error and result.data["backgrounded"] is True
            shell_id = result.data["background_id"]
            assert f"moved to the background with ID: {shell_id}" in result.content
            assert "started" in result.content and "finished" not in result.content
            # Each read returns what was printed since the last one: "finished" may come
            # with a read that still says running, and the completed one then adds nothing.
            reads: list[str] = []
            deadline = time.monotonic() + 15
            while True:
                later = await runner.run(block(f"toolu_out_{time.monotonic_ns()}", "BashOutput", bash_id=shell_id))
                reads.append(later.content)
                if later.data.get("status") == "completed" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
        assert later.data["status"] == "completed" and later.data["exit_code"] == 0
        read = "".join(reads)
        assert read.count("finished") == 1 and "started" not in read, reads

    async def test_it_appends_a_deprecation_warning_for_an_old_tool_name(
        self, gatehouse: Any, ci_bot: Any, workdir: Path
    ) -> None:
        runner, client = await self._runner(gatehouse, ci_bot.token, workdir)
        async with client:
            result = await runner.run(block("toolu_old", "KillBash", shell_id="bash_404"))
        assert result.is_error and result.stage == "validation"
        assert result.content.endswith("Note: the tool name 'KillBash' is deprecated; use 'KillShell' instead.")
