"""Small async clients that record what an agent actually heard, as plain outcomes."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from relay.frames import FrameShapeError, check_frame
from tests.live import LiveServer

AUDIT_UNAVAILABLE = "audit unavailable"


@dataclass(frozen=True)
class Heard:
    """What one agent call ended with: allow / deny / pending / error, and why."""

    channel: str
    behavior: str
    detail: str = ""
    status: int = 0
    request_id: str = ""


def call(command: str, tool_use_id: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "session_id": "rel",
        "cwd": "/srv/project",
        "tool_use_id": tool_use_id or f"toolu_{uuid.uuid4().hex}",
        **extra,
    }


def _detail(decision: dict[str, Any]) -> str:
    reason = decision.get("reason") or {}
    return str(reason.get("detail") or reason.get("type") or decision.get("message") or "")


async def http_submit(
    client: httpx.AsyncClient, srv: LiveServer, token: str, body: dict[str, Any], wait: float = 0
) -> Heard:
    response = await client.post(
        f"{srv.url}/api/v1/permission-requests",
        params={"wait": wait} if wait else None,
        json=body,
        headers={"Authorization": f"Bearer {token}"},
    )
    return heard_from_http(response)


def heard_from_http(response: httpx.Response, channel: str = "http") -> Heard:
    try:
        data = response.json()
    except ValueError:
        return Heard(channel, "error", response.text[:200], response.status_code)
    decision = data.get("decision")
    if isinstance(decision, dict) and decision.get("behavior") in ("allow", "deny"):
        return Heard(channel, decision["behavior"], _detail(decision), response.status_code, str(data.get("id", "")))
    if response.status_code == 202:
        return Heard(channel, "pending", "", 202, str(data.get("id", "")))
    return Heard(channel, "error", json.dumps(data)[:300], response.status_code)


async def hook_submit(
    client: httpx.AsyncClient, srv: LiveServer, token: str, body: dict[str, Any], wait: float = 0
) -> Heard:
    hook = {
        "hook_event_name": "PreToolUse",
        "transcript_path": "",
        "permission_mode": "default",
        **{k: body[k] for k in ("session_id", "cwd", "tool_name", "tool_input", "tool_use_id")},
    }
    response = await client.post(
        f"{srv.url}/hooks/claude-code", params={"wait": wait}, json=hook, headers={"Authorization": f"Bearer {token}"}
    )
    try:
        output = response.json().get("hookSpecificOutput") or {}
    except ValueError:
        return Heard("hook", "error", response.text[:200], response.status_code)
    decision = output.get("permissionDecision")
    if decision in ("allow", "deny"):
        return Heard("hook", decision, str(output.get("permissionDecisionReason", "")), response.status_code)
    if response.status_code == 202 or decision == "ask":
        return Heard("hook", "pending", str(output), response.status_code)
    return Heard("hook", "error", response.text[:300], response.status_code)


class AgentSocket:
    """One agent WebSocket with many requests in flight, matched by `ref`."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.frames: list[dict[str, Any]] = []
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, srv: LiveServer, token: str) -> AgentSocket:
        ws = await connect(
            f"{srv.ws_url}/ws/agent/",
            additional_headers={"Authorization": f"Bearer {token}"},
            proxy=None,
            max_size=None,
            open_timeout=30,
        )
        return cls(ws)

    async def _read(self) -> None:
        async for raw in self.ws:
            frame = json.loads(raw)
            try:
                check_frame(frame)
            except FrameShapeError as exc:  # fail every waiting submit with it, not by timeout
                for future in self.waiting.values():
                    if not future.done():
                        future.set_exception(exc)
                raise
            self.frames.append(frame)
            ref = str(frame.get("ref"))
            if frame.get("type") in ("decision", "error") and ref in self.waiting:
                future = self.waiting.pop(ref)
                if not future.done():
                    future.set_result(frame)

    async def submit(self, body: dict[str, Any], timeout: float = 30) -> Heard:
        ref = uuid.uuid4().hex
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[ref] = future
        await self.ws.send(json.dumps({"type": "permission_request", "ref": ref, "request": body}))
        try:
            frame = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return Heard("ws", "pending")
        if frame["type"] == "error":
            return Heard("ws", "error", f"{frame.get('code')}: {frame.get('message')}")
        decision = frame["decision"]
        return Heard("ws", decision["behavior"], _detail(decision), 0, str(frame.get("id") or ""))

    async def close(self) -> None:
        await self.ws.close()
        self.reader.cancel()
