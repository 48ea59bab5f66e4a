"""A Claude Agent SDK agent whose tool calls are approved through Gatehouse.

    pip install claude-agent-sdk
    export GATEHOUSE_URL=http://127.0.0.1:8000 GATEHOUSE_TOKEN=<agent token>
    export ANTHROPIC_API_KEY=...
    python -m examples.claude_agent_sdk_agent "Create notes.txt saying hi"

Claude Code asks `can_use_tool` for every call it would prompt for; Gatehouse puts the
call on every approval surface and the first person to answer decides.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ResultMessage, TextBlock, query

from agent.claude_sdk import can_use_tool


async def prompt_stream(text: str) -> AsyncIterator[dict[str, Any]]:
    # can_use_tool works only in streaming-input mode: the prompt must be an async iterable.
    yield {"type": "user", "message": {"role": "user", "content": text}}


async def main(task: str) -> None:
    options = ClaudeAgentOptions(can_use_tool=can_use_tool, permission_mode="default")
    async for message in query(prompt=prompt_stream(task), options=options):
        if isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, TextBlock):
                    print(block.text)
        elif isinstance(message, ResultMessage):
            print(f"[done: {message.subtype}]")


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "List the files here."))
