"""A tiny agent loop with no model: scripted `tool_use` blocks go through `ToolRunner`.

Every call is put to Gatehouse before it runs; the `tool_result` blocks printed are what a
model would read next. Run from the repository root:

    export GATEHOUSE_URL=http://127.0.0.1:8000 GATEHOUSE_TOKEN=<agent token>
    python -m examples.scripted_agent --cwd /tmp/demo --mode acceptEdits

Calls that need a person wait until someone answers on the dashboard, Telegram or Slack.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

from agent.client import GatehouseClient
from agent.runner import ToolRunner

SCRIPT: list[dict[str, Any]] = [
    {"name": "Write", "input": {"file_path": "hello.py", "content": "print('hello')\n"}},
    {"name": "Read", "input": {"file_path": "hello.py"}},
    {"name": "Edit", "input": {"file_path": "hello.py", "old_string": "hello", "new_string": "hello, gatehouse"}},
    {"name": "Grep", "input": {"pattern": "gatehouse", "output_mode": "content"}},
    {"name": "Bash", "input": {"command": "ls -la"}},
    # The model's mistakes come back as data it can correct, not as crashes:
    {"name": "Bash", "input": {"cmd": "ls"}},
    {"name": "SummonDragon", "input": {}},
]


async def play(url: str, token: str, cwd: Path, mode: str, script: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run each scripted call in order; return the tool_result blocks."""
    async with GatehouseClient(url, token) as client:
        runner = ToolRunner(cwd=cwd, client=client, mode=mode, session_id=f"example-{uuid.uuid4().hex[:8]}")
        blocks = []
        for index, call in enumerate(script):
            tool_use = {"type": "tool_use", "id": f"toolu_example_{uuid.uuid4().hex[:8]}_{index}", **call}
            result = await runner.run(tool_use)
            blocks.append(result.block())
            print(json.dumps(result.block()), flush=True)
        return blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=os.environ.get("GATEHOUSE_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--cwd", default=os.getcwd(), help="the working directory the tools are confined to")
    parser.add_argument("--mode", default="default", help="permission mode sent with each request")
    args = parser.parse_args()
    token = os.environ.get("GATEHOUSE_TOKEN")
    if not token:
        parser.error("set GATEHOUSE_TOKEN to an agent token (python manage.py createagent NAME)")
    Path(args.cwd).mkdir(parents=True, exist_ok=True)
    asyncio.run(play(args.url, token, Path(args.cwd), args.mode, SCRIPT))


if __name__ == "__main__":
    main()
