"""`claude-agent-sdk` (its bundled Claude Code CLI) with `agent.claude_sdk` as `can_use_tool`.

The model is a fake Messages API on 127.0.0.1 that asks for one Bash call; Gatehouse
decides it. A deny must stop the tool (no side effect, the model reads the reason); an
approval must let it run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.claude_sdk import make_can_use_tool
from tests.agent.sdk_support import Approver, add_rule, approver_token, audit_rows, gatehouse, in_db
from tests.fakes.anthropic_stream import ScriptedToolUse, fake_anthropic

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.claude_cli, pytest.mark.timeout(180)]
__all__ = ["approver_token", "gatehouse"]


def isolated_env(home: Path, api_url: str) -> dict[str, str]:
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": api_url,
        "ANTHROPIC_API_KEY": "test",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


async def one_turn(prompt: str) -> AsyncIterator[dict[str, Any]]:
    # can_use_tool needs streaming input: the prompt is an async iterable of messages.
    yield {"type": "user", "message": {"role": "user", "content": prompt}}


async def run_agent(project: Path, home: Path, api_url: str, can_use_tool: Any) -> list[Any]:
    from claude_agent_sdk import ClaudeAgentOptions, query

    env = {k: v for k, v in os.environ.items() if k.startswith(("ANTHROPIC_", "CLAUDE"))}
    options = ClaudeAgentOptions(
        cwd=str(project),
        can_use_tool=can_use_tool,
        env={**dict.fromkeys(env, ""), **isolated_env(home, api_url)},
        setting_sources=[],
        permission_mode="default",
        max_turns=3,
    )
    return [message async for message in query(prompt=one_turn("Create the marker."), options=options)]


class ClaudeAgentSdkTests:
    async def test_it_stops_the_tool_when_gatehouse_denies(self, gatehouse: Any, ci_bot: Any, tmp_path: Path) -> None:
        await in_db(add_rule)("Bash(touch:*)", "deny")
        project = tmp_path / "project"
        project.mkdir()
        marker = project / "marker"
        script = ScriptedToolUse("Bash", {"command": f"touch {marker}", "description": "make the marker"})
        can_use_tool = make_can_use_tool(url=gatehouse.url, token=ci_bot.token, timeout=60, cwd=str(project))
        with fake_anthropic(script) as fake:
            await asyncio.wait_for(run_agent(project, tmp_path / "home", fake.url, can_use_tool), 150)
        assert not marker.exists()
        assert fake.tool_result_is_error()
        assert "Bash(touch:*)" in fake.tool_result_text()
        rows = await in_db(audit_rows)(request__tool_use_id=script.id)
        assert [(r.behavior, r.reason["type"]) for r in rows] == [("deny", "rule")]

    async def test_it_runs_the_tool_after_a_person_approves(
        self, gatehouse: Any, ci_bot: Any, approver_token: str, tmp_path: Path
    ) -> None:
        project = tmp_path / "project"
        project.mkdir()
        marker = project / "marker"
        script = ScriptedToolUse("Bash", {"command": f"touch {marker}", "description": "make the marker"})
        can_use_tool = make_can_use_tool(url=gatehouse.url, token=ci_bot.token, timeout=60, cwd=str(project))
        approver = Approver(gatehouse.url, approver_token)
        with fake_anthropic(script) as fake:
            agent = asyncio.create_task(run_agent(project, tmp_path / "home", fake.url, can_use_tool))
            row = await approver.pending(script.id, timeout=90)
            assert row["tool_input"]["command"] == f"touch {marker}"
            response = await approver.decide(row["id"], "allow")
            assert response.status_code == 200, response.text
            await asyncio.wait_for(agent, 150)
        await approver.aclose()
        assert marker.exists()
        assert not fake.tool_result_is_error()
