"""One spec for a call: the REST API, the agent socket and the Claude Code hook refuse alike.

Each bad call of the table is sent through all three doors of a live server; each must
be refused with a message naming what to fix, and none may create a request.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from approvals.models import PermissionRequest
from tests.relay.wsclient import agent_connect, receive_until, send

pytestmark = pytest.mark.django_db(transaction=True)

GOOD = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "session_id": "s1", "cwd": "/tmp/proj"}

# (what is wrong, the call, a word the refusal must contain)
BAD: list[tuple[str, dict[str, Any], str]] = [
    ("NUL in the input", {**GOOD, "tool_input": {"command": "ls\x00-la"}}, "NUL"),
    ("NUL deep in the input", {**GOOD, "tool_input": {"edits": [{"old": "\x00"}]}}, "NUL"),
    ("NUL in cwd", {**GOOD, "cwd": "/tmp/\x00"}, "cwd"),
    ("cwd too long", {**GOOD, "cwd": "/" + "a" * 5000}, "cwd"),
    ("session id too long", {**GOOD, "session_id": "s" * 201}, "session_id"),
    ("tool_use_id too long", {**GOOD, "tool_use_id": "t" * 201}, "tool_use_id"),
    ("transcript path too long", {**GOOD, "transcript_path": "/" + "t" * 5000}, "transcript_path"),
    ("input not an object", {**GOOD, "tool_input": ["ls"]}, "tool_input"),
    ("no tool name", {**GOOD, "tool_name": ""}, "tool_name"),
    ("tool name too long", {**GOOD, "tool_name": "T" * 201}, "tool_name"),
]


def hook_body(call: dict[str, Any], n: int) -> dict[str, Any]:
    return {
        "hook_event_name": "PreToolUse",
        "tool_use_id": call.get("tool_use_id", f"toolu_{n}"),
        "permission_mode": "default",
        **{k: v for k, v in call.items() if k != "tool_use_id"},
    }


class CallSpecTests:
    @pytest.mark.parametrize(("what", "call", "word"), BAD, ids=[row[0] for row in BAD])
    def test_every_door_refuses_the_same_bad_call(
        self, relay_server: Any, ci_bot: Any, what: str, call: dict[str, Any], word: str
    ) -> None:
        auth = {"Authorization": f"Bearer {ci_bot.token}"}
        rest = httpx.post(f"{relay_server.url}/api/v1/permission-requests", json=call, headers=auth, timeout=30)
        hook = httpx.post(f"{relay_server.url}/hooks/claude-code", json=hook_body(call, 1), headers=auth, timeout=30)

        async def socket() -> dict[str, Any]:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                await send(ws, {"type": "permission_request", "ref": "r", "request": call})
                return await receive_until(ws, lambda f: f.get("ref") == "r")

        frame = asyncio.run(socket())
        assert rest.status_code == 400 and word in rest.text, rest.text
        assert hook.status_code == 400 and word in hook.text, hook.text
        assert frame["type"] == "error" and frame["code"] == "invalid_request", frame
        assert word in frame["message"], frame
        assert not PermissionRequest.objects.exists()

    def test_every_door_takes_the_good_call(self, relay_server: Any, ci_bot: Any) -> None:
        auth = {"Authorization": f"Bearer {ci_bot.token}"}
        rest = httpx.post(f"{relay_server.url}/api/v1/permission-requests", json=GOOD, headers=auth, timeout=30)
        hook = httpx.post(
            f"{relay_server.url}/hooks/claude-code?wait=0", json=hook_body(GOOD, 2), headers=auth, timeout=30
        )

        async def socket() -> dict[str, Any]:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                await send(ws, {"type": "permission_request", "ref": "r", "request": GOOD})
                return await receive_until(ws, lambda f: f.get("ref") == "r")

        frame = asyncio.run(socket())
        assert rest.status_code in (200, 202), rest.text
        assert hook.status_code in (200, 202), hook.text
        assert frame["type"] in ("pending", "decision"), frame
        assert PermissionRequest.objects.count() == 3
