"""`agent.claude_sdk.can_use_tool` called as Claude Code calls it, against a real Gatehouse."""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, ToolPermissionContext

from agent.claude_sdk import make_can_use_tool
from tests.agent.sdk_support import add_rule, gatehouse, in_db, requests_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
__all__ = ["gatehouse"]


class CanUseToolTests:
    async def test_it_reads_its_server_and_token_from_the_environment(
        self, gatehouse: Any, ci_bot: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        await in_db(add_rule)("Bash(npm test)", "allow")
        await in_db(add_rule)("Bash(rm:*)", "deny")
        monkeypatch.setenv("GATEHOUSE_URL", gatehouse.url)
        monkeypatch.setenv("GATEHOUSE_TOKEN", ci_bot.token)
        can_use_tool = make_can_use_tool(cwd="/srv/app")
        allowed = await can_use_tool("Bash", {"command": "npm test"}, ToolPermissionContext(tool_use_id="toolu_a"))
        denied = await can_use_tool("Bash", {"command": "rm -rf /"}, ToolPermissionContext(tool_use_id="toolu_d"))
        assert allowed == PermissionResultAllow(updated_input={"command": "npm test"})
        assert isinstance(denied, PermissionResultDeny) and "Bash(rm:*)" in denied.message
        [request] = await in_db(requests_for)("toolu_d")
        assert request.cwd == "/srv/app"

    async def test_it_denies_when_it_cannot_ask(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("GATEHOUSE_URL", raising=False)
        monkeypatch.delenv("GATEHOUSE_TOKEN", raising=False)
        unconfigured = await make_can_use_tool()("Bash", {"command": "ls"}, ToolPermissionContext(tool_use_id="t1"))
        unreachable = await make_can_use_tool(url="http://127.0.0.1:9", token="gha_x")(
            "Bash", {"command": "ls"}, ToolPermissionContext(tool_use_id="t2")
        )
        assert isinstance(unconfigured, PermissionResultDeny) and "GATEHOUSE_URL" in unconfigured.message
        assert isinstance(unreachable, PermissionResultDeny) and "cannot reach" in unreachable.message
