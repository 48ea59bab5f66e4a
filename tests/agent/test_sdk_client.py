"""`GatehouseClient` against a real server: many in flight, reconnect, HTTP fallback, cancel."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent.client import GatehouseClient, GatehouseError, GatehouseTimeout, SyncGatehouseClient
from tests.agent.sdk_support import Approver, approver_token, gatehouse, in_db, requests_for
from tests.live import live_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]
__all__ = ["approver_token", "gatehouse"]


def bash(tool_use_id: str, command: str = "make deploy") -> dict[str, Any]:
    return {
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": tool_use_id,
        "session_id": "s1",
        "cwd": "/srv/app",
        "permission_mode": "default",
        "context": "interactive",
    }


@pytest.fixture
def not_gatehouse() -> Iterator[str]:
    """A plain HTTP server that speaks no WebSocket and answers 404 to everything."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(404)
            self.end_headers()

        do_POST = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class ClientTests:
    async def test_it_keeps_many_requests_in_flight_on_one_socket(
        self, gatehouse: Any, ci_bot: Any, approver_token: str
    ) -> None:
        approver = Approver(gatehouse.url, approver_token)
        async with GatehouseClient(gatehouse.url, ci_bot.token) as client:
            ids = [f"toolu_many_{n}" for n in range(5)]
            calls = [bash(tool_use_id, f"make step{n}") for n, tool_use_id in enumerate(ids)]
            waits = [asyncio.create_task(client.request_permission(call)) for call in calls]
            # Answer in reverse order: each decision must reach its own caller.
            for n, tool_use_id in reversed(list(enumerate(ids))):
                await approver.answer(tool_use_id, "allow" if n % 2 == 0 else "deny", f"answer {n}")
            decisions = await asyncio.wait_for(asyncio.gather(*waits), 30)
            assert client.mode == "websocket"
        await approver.aclose()
        assert [d.behavior for d in decisions] == ["allow", "deny", "allow", "deny", "allow"]
        assert [d.message for d in decisions][1] == "answer 1"
        assert all(d.decided_by == "alice" for d in decisions)

    async def test_it_resumes_after_the_server_restarts(
        self, ci_bot: Any, approver_token: str, django_db_blocker: Any
    ) -> None:
        with live_server() as first:
            port = first.port
            client = GatehouseClient(
                first.url, ci_bot.token, backoff_initial=0.1, backoff_max=0.5, http_fallback_after=100
            )
            await client.start()
            waiting = asyncio.create_task(client.request_permission(bash("toolu_resume")))
            approver = Approver(first.url, approver_token)
            row = await approver.pending("toolu_resume")
            first.kill()
        # The decision is made while the agent's socket is down.
        with live_server(port=port) as second:
            response = await approver.decide(row["id"], "allow", "go ahead")
            assert response.status_code == 200, response.text
            decision = await asyncio.wait_for(waiting, 30)
            assert second.port == port
        await client.close()
        await approver.aclose()
        assert decision.allowed and decision.message == "go ahead" and decision.request_id == row["id"]
        assert client.reconnects >= 1
        assert len(await in_db(requests_for)("toolu_resume")) == 1

    async def test_it_withdraws_a_request_when_its_wait_times_out(self, gatehouse: Any, ci_bot: Any) -> None:
        async with GatehouseClient(gatehouse.url, ci_bot.token) as client:
            with pytest.raises(GatehouseTimeout):
                await client.request_permission(bash("toolu_late"), timeout=1.0)
        [request] = await in_db(requests_for)("toolu_late")
        for _ in range(100):
            if request.state != "pending":
                break
            await asyncio.sleep(0.05)
            [request] = await in_db(requests_for)("toolu_late")
        assert request.state == "cancelled"

    async def test_it_long_polls_over_http(self, gatehouse: Any, ci_bot: Any, approver_token: str) -> None:
        approver = Approver(gatehouse.url, approver_token)
        async with GatehouseClient(gatehouse.url, ci_bot.token, transport="http", long_poll_seconds=1) as client:
            waiting = asyncio.create_task(client.request_permission(bash("toolu_http")))
            await approver.answer("toolu_http", "deny", "not over HTTP either")
            decision = await asyncio.wait_for(waiting, 30)
        await approver.aclose()
        assert client.mode == "http"
        assert decision.behavior == "deny" and decision.message == "not over HTTP either"

    async def test_it_falls_back_to_http_when_the_socket_cannot_open(self, not_gatehouse: str) -> None:
        async with GatehouseClient(not_gatehouse, "gha_whatever", connect_timeout=2) as client:
            assert client.mode == "http"
            with pytest.raises(GatehouseError) as caught:
                await asyncio.wait_for(client.request_permission(bash("toolu_nowhere")), 10)
        assert caught.value.code == "404"

    async def test_it_fails_fast_on_a_rejected_token(self, gatehouse: Any, ci_bot: Any) -> None:
        async with GatehouseClient(gatehouse.url, "gha_not-a-real-token") as client:
            with pytest.raises(GatehouseError) as caught:
                await asyncio.wait_for(client.request_permission(bash("toolu_badtoken")), 10)
        assert caught.value.code in ("unauthorized", "unauthenticated")

    def test_it_offers_a_blocking_client_for_scripts(self, gatehouse: Any, ci_bot: Any) -> None:
        from tests.agent.sdk_support import add_rule

        add_rule("Bash(make deploy)", "allow")
        with SyncGatehouseClient(gatehouse.url, ci_bot.token) as client:
            decision = client.request_permission(bash("toolu_sync"), timeout=20)
        assert decision.allowed and decision.reason["type"] == "rule"
