"""A fake MCP server over stdio: one tool and one resource, in the real wire format.

Claude Code starts it from an ``--mcp-config`` entry (``python -m tests.fakes.mcp_stdio``)
and speaks JSON-RPC 2.0 to it, one message a line: ``initialize``, then ``tools/list``,
``resources/list`` and the like. A server that offers resources is what makes Claude
Code add its own resource tools (``ListMcpResourcesTool``, ``ReadMcpResourceTool``, …).
"""

from __future__ import annotations

import json
import sys
from typing import Any

NAME = "probe"
RESOURCE_URI = "probe://note"

_TOOLS = [
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    }
]
_RESOURCES = [{"uri": RESOURCE_URI, "name": "note", "mimeType": "text/plain"}]


def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The result of one request; an unknown method gets an empty result."""
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": {"name": NAME, "version": "1.0.0"},
        }
    if method == "tools/list":
        return {"tools": _TOOLS}
    if method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", ""))
        return {"content": [{"type": "text", "text": text}]}
    if method == "resources/list":
        return {"resources": _RESOURCES}
    if method == "resources/templates/list":
        return {"resourceTemplates": []}
    if method == "resources/read":
        return {"contents": [{"uri": params.get("uri"), "mimeType": "text/plain", "text": "a note"}]}
    if method == "prompts/list":
        return {"prompts": []}
    return {}


def serve() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message:
            continue  # a notification: nothing to answer
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(str(message.get("method")), params)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
