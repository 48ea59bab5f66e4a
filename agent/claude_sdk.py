"""Gatehouse as the `can_use_tool` callback of the Claude Agent SDK (`claude-agent-sdk`).

    from claude_agent_sdk import ClaudeAgentOptions
    from agent.claude_sdk import can_use_tool      # GATEHOUSE_URL, GATEHOUSE_TOKEN

    options = ClaudeAgentOptions(can_use_tool=can_use_tool)

Claude Code calls `can_use_tool` only for calls it would otherwise prompt for (its own
allow rules and modes come first), and only in streaming-input mode (`ClaudeSDKClient`,
or `query()` with an async iterable prompt). Every such call becomes a Gatehouse
permission request; the first approver to answer decides. Anything but an explicit
allow — a deny, a timeout, an unreachable server — is a deny: the adapter fails closed.
"""

from __future__ import annotations

import asyncio
import os
import uuid
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, ToolPermissionContext

from agent.client import GatehouseClient, GatehouseError

PermissionResult = PermissionResultAllow | PermissionResultDeny
CanUseTool = Callable[[str, dict[str, Any], ToolPermissionContext], Awaitable[PermissionResult]]


def _token_from_env() -> str:
    token = os.environ.get("GATEHOUSE_TOKEN", "")
    path = os.environ.get("GATEHOUSE_TOKEN_FILE")
    if not token and path:
        token = Path(path).read_text().strip()
    return token


def make_can_use_tool(
    *,
    url: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    session_id: str | None = None,
    cwd: str | None = None,
    permission_mode: str = "default",
    context: str = "interactive",
    transport: str = "auto",
) -> CanUseTool:
    """Build a `can_use_tool` callback that asks the Gatehouse at ``url``.

    - ``url`` / ``token`` default to ``GATEHOUSE_URL`` / ``GATEHOUSE_TOKEN`` (or
      ``GATEHOUSE_TOKEN_FILE``), read on the first call.
    - ``timeout`` bounds the wait for a human (None: the server's ask deadline decides).
    - One client (one WebSocket) per event loop serves every call of that loop.
    """
    session = session_id or f"sdk-{uuid.uuid4().hex[:12]}"
    # Keyed by the loop itself (weakly): a client's socket belongs to the loop that opened it.
    clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, GatehouseClient] = weakref.WeakKeyDictionary()

    def client_for_loop() -> GatehouseClient:
        loop = asyncio.get_running_loop()
        client = clients.get(loop)
        if client is None:
            server = url or os.environ.get("GATEHOUSE_URL", "")
            secret = token or _token_from_env()
            if not server or not secret:
                raise GatehouseError("set GATEHOUSE_URL and GATEHOUSE_TOKEN to ask Gatehouse", "not_configured")
            client = GatehouseClient(server, secret, transport=transport)  # type: ignore[arg-type]
            clients[loop] = client
        return client

    async def can_use_tool(tool_name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext) -> PermissionResult:
        request: dict[str, Any] = {
            "tool_name": tool_name,
            "tool_input": tool_input,
            "session_id": session,
            "cwd": cwd or os.getcwd(),
            "permission_mode": permission_mode,
            "context": context,
        }
        if ctx.tool_use_id:
            request["tool_use_id"] = ctx.tool_use_id
        suggestions = _suggestions(ctx)
        if suggestions:
            request["permission_suggestions"] = suggestions
        try:
            decision = await client_for_loop().request_permission(request, timeout=timeout)
        except GatehouseError as exc:
            return PermissionResultDeny(message=f"Gatehouse could not decide ({exc}), so {tool_name} was denied.")
        if decision.allowed:
            return PermissionResultAllow(updated_input=decision.updated_input or tool_input)
        return PermissionResultDeny(message=decision.message or f"Gatehouse denied {tool_name}.")

    return can_use_tool


def _suggestions(ctx: ToolPermissionContext) -> list[dict[str, Any]]:
    """Claude Code's suggested rules, so an approver can "always allow" in one tap."""
    found = []
    for suggestion in ctx.suggestions or []:
        to_dict = getattr(suggestion, "to_dict", None)
        try:
            found.append(to_dict() if callable(to_dict) else dict(suggestion))  # type: ignore[call-overload]
        except (TypeError, ValueError):
            continue
    return found


# Usable as it is: configured from the environment on its first call.
can_use_tool: CanUseTool = make_can_use_tool()
