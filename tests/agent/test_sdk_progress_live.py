"""Bash output reaches the dashboard while the command is still running."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from agent.client import GatehouseClient
from agent.runner import ToolRunner
from tests.agent.sdk_support import add_rule, gatehouse, in_db

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
__all__ = ["gatehouse"]


def session_cookie(user: Any) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return str(client.cookies["sessionid"].value)


async def next_progress(dashboard: ClientConnection, text: str) -> dict[str, Any]:
    while True:
        frame = json.loads(await dashboard.recv())
        if frame["type"] == "request.progress" and text in frame["data"].get("text", ""):
            return dict(frame)


class BashProgressTests:
    async def test_it_streams_output_to_the_dashboard_before_the_command_ends(
        self, gatehouse: Any, ci_bot: Any, alice: Any, tmp_path: Path
    ) -> None:
        await in_db(add_rule)("Bash", "allow")
        cookie = await in_db(session_cookie)(alice)
        headers = {"Cookie": f"sessionid={cookie}"}
        async with connect(
            f"{gatehouse.ws_url}/ws/dashboard/", additional_headers=headers, origin=gatehouse.url, proxy=None
        ) as dashboard:
            await dashboard.send(json.dumps({"type": "subscribe"}))
            assert json.loads(await asyncio.wait_for(dashboard.recv(), 10))["type"] == "snapshot"
            async with GatehouseClient(gatehouse.url, ci_bot.token) as client:
                runner = ToolRunner(cwd=tmp_path, client=client)
                # The command waits for the test's go-ahead, so "first" must arrive while it runs.
                command = "echo first; for i in $(seq 300); do [ -e go ] && break; sleep 0.1; done; echo second"
                tool_use = {"id": "toolu_live", "name": "Bash", "input": {"command": command}}
                task = asyncio.create_task(runner.run(tool_use))
                first = await asyncio.wait_for(next_progress(dashboard, "first"), 15)
                assert not task.done()
                (tmp_path / "go").touch()
                second = await asyncio.wait_for(next_progress(dashboard, "second"), 15)
                result = await asyncio.wait_for(task, 15)
        assert result.content == "first\nsecond"
        assert first["id"] == second["id"] == result.request_id
        assert first["data"]["stream"] == "stdout"
