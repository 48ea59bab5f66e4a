"""Deadlines: an unanswered ask is denied with reason `timeout`, even after a crash."""

from __future__ import annotations

import asyncio
import signal
import time
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from approvals import services
from approvals.models import Decision
from tests.live import live_server, sweeper_process
from tests.relay.wsclient import agent_connect, ask_call, of_type, receive_until, send

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for_state(request: Any, state: str, timeout: float) -> bool:
    """Re-read the request until it reaches ``state``; False if it has not within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        request.refresh_from_db()
        if request.state == state or time.monotonic() >= deadline:
            return bool(request.state == state)
        time.sleep(0.05)


class DeadlineTests:
    def test_it_denies_an_unanswered_ask_with_reason_timeout(self, ci_bot: Any) -> None:
        with live_server(GATEHOUSE_ASK_TIMEOUT="2", GATEHOUSE_SWEEP_INTERVAL="1") as srv:

            async def scenario() -> dict[str, Any]:
                async with agent_connect(srv, ci_bot.token) as ws:
                    await send(ws, {"type": "permission_request", "ref": "r", "request": ask_call()})
                    await receive_until(ws, of_type("pending"))
                    return await receive_until(ws, of_type("decision"), timeout=15)

            frame = asyncio.run(scenario())
        assert frame["status"] == "expired"
        assert frame["decision"]["behavior"] == "deny"
        assert frame["decision"]["reason"]["type"] == "timeout"
        assert frame["decision"]["decided_by"] == "timeout"
        assert Decision.objects.get(request_id=frame["id"]).reason_type == "timeout"

    def test_it_expires_requests_of_a_server_that_died(self, ci_bot: Any) -> None:
        async def submit(srv: Any) -> str:
            async with agent_connect(srv, ci_bot.token) as ws:
                await send(ws, {"type": "permission_request", "ref": "r", "request": ask_call()})
                return str((await receive_until(ws, of_type("pending")))["id"])

        async def resume(srv: Any, request_id: str) -> dict[str, Any]:
            async with agent_connect(srv, ci_bot.token) as ws:
                await send(ws, {"type": "resume", "ids": [{"id": request_id, "ref": "r"}]})
                return await receive_until(ws, of_type("decision"), timeout=20)

        with live_server(GATEHOUSE_ASK_TIMEOUT="3", GATEHOUSE_SWEEP_INTERVAL="60") as first:
            request_id = asyncio.run(submit(first))
            first.kill(signal.SIGKILL)  # no goodbye: whatever it had in memory is gone
        with live_server(GATEHOUSE_SWEEP_INTERVAL="1") as second:
            frame = asyncio.run(resume(second, request_id))
        assert frame["id"] == request_id
        assert frame["decision"]["reason"]["type"] == "timeout"

    def test_the_first_http_request_starts_a_single_servers_own_sweeper(self, ci_bot: Any) -> None:
        import httpx

        with override_settings(GATEHOUSE_ASK_TIMEOUT=1):
            request = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
        with live_server(GATEHOUSE_SWEEP_INTERVAL="1", GATEHOUSE_INPROCESS_SWEEPER="1") as srv:
            httpx.get(f"{srv.url}/healthz", timeout=10)  # no WebSocket at all
            assert wait_for_state(request, "expired", timeout=15)

    def test_a_server_beside_a_sweeper_process_leaves_deadlines_to_it(self, ci_bot: Any) -> None:
        import httpx

        with override_settings(GATEHOUSE_ASK_TIMEOUT=1):
            request = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
        with live_server(GATEHOUSE_SWEEP_INTERVAL="1", GATEHOUSE_INPROCESS_SWEEPER="0") as srv:
            httpx.get(f"{srv.url}/healthz", timeout=10)
            # Well past the deadline and a sweep interval: the server itself sweeps nothing.
            assert not wait_for_state(request, "expired", timeout=4)
            with sweeper_process() as sweeper:
                # A bound: a process that starts Django, connects and sweeps once took more
                # than 15 s on a loaded 2-core machine.
                assert wait_for_state(request, "expired", timeout=45), sweeper.log()

    def test_run_sweeper_expires_overdue_requests(self, ci_bot: Any) -> None:
        with override_settings(GATEHOUSE_ASK_TIMEOUT=0):
            overdue = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
        waiting = services.request_submit(agent=ci_bot.agent, call=ask_call("rm -rf later", tool_use_id="t2")).request
        out = StringIO()
        call_command("run_sweeper", "--once", stdout=out)
        assert "expired 1" in out.getvalue()
        overdue.refresh_from_db()
        waiting.refresh_from_db()
        assert (overdue.state, waiting.state) == ("expired", "pending")

    def test_two_sweepers_at_once_expire_each_request_once(self, ci_bot: Any) -> None:
        import threading

        from django.db import connection

        from relay.sweeper import sweep_once

        with override_settings(GATEHOUSE_ASK_TIMEOUT=0):
            for n in range(10):
                services.request_submit(agent=ci_bot.agent, call=ask_call(f"rm -rf {n}", tool_use_id=f"t{n}"))
        counts: list[int] = []

        def sweeper() -> None:
            try:
                counts.append(sweep_once())
            finally:
                connection.close()

        threads = [threading.Thread(target=sweeper) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sum(counts) == 10
        assert Decision.objects.filter(reason_type="timeout").count() == 10
