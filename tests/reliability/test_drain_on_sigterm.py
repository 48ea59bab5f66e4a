"""A server process stopped with SIGTERM drains: sockets move, asks stay pending, nothing is lost.

`gatehouse.serve` is Daphne as production runs it. On SIGTERM it stops listening, sends
every agent socket a `reconnect` frame and a 4012 close, lets HTTP requests in flight
finish, and exits 0. The agent reconnects to another process and resumes.
"""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from approvals import services
from approvals.models import Decision, PermissionRequest, RequestState
from relay.frames import check_frame
from tests.live import live_server
from tests.reliability.clients import call

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


async def frames_until_closed(ws: ClientConnection, timeout: float = 20) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []

    async def read() -> None:
        try:
            async for raw in ws:
                frames.append(json.loads(raw))
                check_frame(frames[-1])
        except ConnectionClosed:
            pass

    await asyncio.wait_for(read(), timeout)
    return frames


async def ask_over_socket(ws: ClientConnection, command: str) -> str:
    await ws.send(json.dumps({"type": "permission_request", "ref": command, "request": call(command)}))
    frame = json.loads(await asyncio.wait_for(ws.recv(), 15))
    assert frame["type"] == "pending", frame
    return str(frame["id"])


class DrainOnSigtermTests:
    async def test_it_moves_sockets_and_finishes_requests_in_flight(
        self, redis_url: str, ci_bot: Any, alice: Any, django_db_blocker: Any
    ) -> None:
        headers = {"Authorization": f"Bearer {ci_bot.token}"}
        with django_db_blocker.unblock(), live_server(server="serve", REDIS_URL=redis_url) as srv:
            ws = await connect(f"{srv.ws_url}/ws/agent/", additional_headers=headers)
            on_socket = await ask_over_socket(ws, "rm -rf build")
            async with httpx.AsyncClient(timeout=30) as http:
                # A hook-style long-poll waiting on this process when the signal comes.
                submit = f"{srv.url}/api/v1/permission-requests?wait=25"
                in_flight = asyncio.ensure_future(http.post(submit, json=call("rm -rf dist"), headers=headers))
                waiting = await self._pending_other_than(on_socket)
                srv.process.send_signal(signal.SIGTERM)
                frames = await frames_until_closed(ws)
                assert ws.close_code == 4012
                assert frames == [
                    {
                        "type": "reconnect",
                        "reason": "server_restarting",
                        "message": "this server process is restarting; reconnect and resume",
                    }
                ]
                # The draining process still answers the request it holds.
                await sync_to_async(services.request_decide)(
                    waiting, services.Answer(behavior="allow", surface="api", user=alice)
                )
                answered = await asyncio.wait_for(in_flight, 20)
            exit_code = await asyncio.to_thread(srv.process.wait, 30)
        assert answered.status_code == 200, answered.text
        assert answered.json()["decision"]["behavior"] == "allow"
        assert exit_code == 0, srv.log()
        assert "drained 1 socket(s)" in srv.log()
        # The socket's ask is untouched: still pending, no decision recorded for it.
        state = await sync_to_async(lambda: PermissionRequest.objects.get(pk=on_socket).state)()
        assert state == RequestState.PENDING
        assert not await sync_to_async(Decision.objects.filter(request_id=uuid.UUID(on_socket)).exists)()

    async def test_it_answers_a_moved_ask_once_on_the_next_process(
        self, redis_url: str, ci_bot: Any, alice: Any, django_db_blocker: Any
    ) -> None:
        headers = {"Authorization": f"Bearer {ci_bot.token}"}
        with django_db_blocker.unblock(), live_server(server="serve", REDIS_URL=redis_url) as first:
            ws = await connect(f"{first.ws_url}/ws/agent/", additional_headers=headers)
            request_id = await ask_over_socket(ws, "rm -rf build")
            first.process.send_signal(signal.SIGTERM)
            await frames_until_closed(ws)
        with django_db_blocker.unblock(), live_server(server="serve", REDIS_URL=redis_url) as second:
            async with connect(f"{second.ws_url}/ws/agent/", additional_headers=headers) as moved:
                await moved.send(json.dumps({"type": "resume", "ids": [{"id": request_id, "ref": "again"}]}))
                assert json.loads(await asyncio.wait_for(moved.recv(), 15))["type"] == "pending"
                await sync_to_async(services.request_decide)(
                    request_id, services.Answer(behavior="deny", surface="api", user=alice)
                )
                decision = json.loads(await asyncio.wait_for(moved.recv(), 15))
                assert (decision["type"], decision["ref"], decision["id"]) == ("decision", "again", request_id)
                assert decision["decision"]["behavior"] == "deny"
                with pytest.raises(TimeoutError):  # exactly once: nothing follows
                    await asyncio.wait_for(moved.recv(), 1.5)

    @staticmethod
    async def _pending_other_than(request_id: str) -> str:
        def find() -> str | None:
            found = PermissionRequest.objects.filter(state=RequestState.PENDING).exclude(pk=request_id).first()
            return str(found.pk) if found else None

        for _ in range(200):
            other = await sync_to_async(find)()
            if other:
                return other
            await asyncio.sleep(0.05)
        raise AssertionError("the long-poll's request never appeared")
