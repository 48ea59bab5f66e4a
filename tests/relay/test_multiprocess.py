"""Two server processes behind one Redis and one database behave as one."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from approvals import services
from approvals.models import Decision
from tests.live import live_server
from tests.relay.wsclient import (
    agent_connect,
    ask_call,
    dashboard_connect,
    of_type,
    receive_until,
    send,
    session_cookie,
)

pytestmark = pytest.mark.django_db(transaction=True)


class MultiProcessTests:
    def test_a_decision_on_one_process_reaches_an_agent_on_the_other(self, ci_bot: Any, alice: Any) -> None:
        token = services.personal_token_create(user=alice)
        cookie = session_cookie(alice)
        with live_server() as one, live_server() as two:

            async def scenario() -> tuple[dict[str, Any], dict[str, Any], int]:
                async with agent_connect(two, ci_bot.token) as agent, dashboard_connect(one, cookie) as board:
                    await send(board, {"type": "subscribe"})
                    await receive_until(board, of_type("snapshot"))
                    await send(agent, {"type": "permission_request", "ref": "r", "request": ask_call()})
                    request_id = (await receive_until(agent, of_type("pending")))["id"]
                    # Created on process two, shown by process one's dashboard.
                    created = await receive_until(board, of_type("request.created", id=request_id), timeout=5)
                    async with httpx.AsyncClient(base_url=one.url, timeout=20) as api:
                        response = await api.post(
                            f"/api/v1/permission-requests/{request_id}/decision",
                            json={"behavior": "allow", "message": "go"},
                            headers={"Authorization": f"Bearer {token}"},
                        )
                    # Decided on process one, heard by the agent on process two — within a
                    # second, so by the doorbell, not the slow database re-check.
                    decision = await receive_until(agent, of_type("decision"), timeout=3)
                    return created, decision, response.status_code

            created, decision, status = asyncio.run(scenario())
        assert created["id"] == decision["id"]
        assert status == 200
        assert decision["decision"]["behavior"] == "allow"
        assert decision["decision"]["decided_by"] == "alice"
        assert Decision.objects.filter(request_id=decision["id"]).count() == 1
