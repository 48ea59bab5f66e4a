"""Bad frames get an error frame (or a close code), never a crash, and lose nothing pending."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from approvals.models import PermissionRequest
from tests.live import LiveServer
from tests.relay.wsclient import agent_connect, ask_call, close_code, of_type, receive, receive_until, send

pytestmark = pytest.mark.django_db(transaction=True)


async def _reply_to_raw(srv: LiveServer, token: str, raw: str | bytes) -> dict[str, Any]:
    async with agent_connect(srv, token) as ws:
        await ws.send(raw)
        reply = await receive(ws)
        # The socket is still usable afterwards.
        await send(ws, {"type": "permission_request", "ref": "after", "request": ask_call()})
        await receive_until(ws, of_type("pending", ref="after"))
        return reply


class BadFrameTests:
    @pytest.mark.parametrize(
        ("raw", "code"),
        [
            ("not json", "invalid_json"),
            ("[1, 2]", "invalid_frame"),
            ('{"type": "teleport"}', "unknown_type"),
            ('{"type": "permission_request", "ref": "x"}', "invalid_frame"),
            ('{"type": "permission_request", "ref": "x", "request": {"tool_input": {}}}', "invalid_request"),
            (
                '{"type": "permission_request", "ref": "x", "request": {"tool_name": "Bash", "tool_input": "rm"}}',
                "invalid_request",
            ),
            ('{"type": "cancel"}', "invalid_frame"),
            ('{"type": "cancel", "id": "00000000-0000-0000-0000-000000000000"}', "not_found"),
            ('{"type": "tool_result", "id": "00000000-0000-0000-0000-000000000000"}', "invalid_frame"),
            ('{"type": "resume", "ids": "all"}', "invalid_frame"),
            (b"\x00\x01binary", "invalid_frame"),
        ],
    )
    def test_it_answers_a_bad_frame_with_an_error_and_stays_open(
        self, relay_server: LiveServer, ci_bot: Any, raw: str | bytes, code: str
    ) -> None:
        reply = asyncio.run(_reply_to_raw(relay_server, ci_bot.token, raw))
        assert reply["type"] == "error"
        assert reply["code"] == code
        assert reply["message"]

    def test_it_refuses_frames_over_64_kib(self, relay_server: LiveServer, ci_bot: Any) -> None:
        huge = json.dumps({"type": "progress", "id": "x", "data": "x" * (65 * 1024)})
        reply = asyncio.run(_reply_to_raw(relay_server, ci_bot.token, huge))
        assert reply["code"] == "frame_too_large"

    def test_it_closes_a_flooding_socket_with_4429_and_keeps_its_requests(
        self, relay_server: LiveServer, ci_bot: Any
    ) -> None:
        async def scenario() -> tuple[str, list[dict[str, Any]], int | None, dict[str, Any]]:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                await send(ws, {"type": "permission_request", "ref": "keep", "request": ask_call()})
                pending = await receive_until(ws, of_type("pending", ref="keep"))
                for _ in range(400):
                    await ws.send('{"type": "teleport"}')
                frames: list[dict[str, Any]] = []
                code = None
                try:
                    while True:
                        frames.append(json.loads(await asyncio.wait_for(ws.recv(), 15)))
                except Exception:
                    code = ws.close_code
            # Reconnect: the pending request is still there and can be resumed.
            async with agent_connect(relay_server, ci_bot.token) as ws:
                await send(ws, {"type": "resume", "ids": [pending["id"]]})
                resumed = await receive(ws)
            return pending["id"], frames, code, resumed

        request_id, frames, code, resumed = asyncio.run(scenario())
        assert code == 4429
        assert any(f.get("code") == "rate_limited" for f in frames)
        assert resumed == {"type": "pending", "ref": None, "id": request_id}
        assert PermissionRequest.objects.get(pk=request_id).state == "pending"

    def test_it_survives_a_client_that_vanishes_mid_request(self, relay_server: LiveServer, ci_bot: Any) -> None:
        async def scenario() -> int | None:
            ws = await agent_connect(relay_server, ci_bot.token)
            await send(ws, {"type": "permission_request", "ref": "r", "request": ask_call()})
            ws.transport.abort()  # no close handshake at all
            async with agent_connect(relay_server, ci_bot.token) as again:
                await send(
                    again,
                    {"type": "permission_request", "ref": "r2", "request": ask_call("rm -rf other", tool_use_id="t2")},
                )
                await receive_until(again, of_type("pending", ref="r2"))
                await again.close()
                return await close_code(again)

        asyncio.run(scenario())
        assert PermissionRequest.objects.filter(state="pending").count() >= 1
