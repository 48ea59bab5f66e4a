"""Ask the real Claude Code CLI which tools it offers and which of them it asks about.

Each run is one ``claude -p`` process in the SDK's stdio mode (``--permission-prompt-tool
stdio``: an ask arrives as a ``can_use_tool`` control request, answered with a deny so
nothing asked runs), with no hooks, in a fresh temporary home and project, against a fake
Anthropic API on 127.0.0.1. The request body the CLI sends that API carries its tool list
(``name``, ``input_schema``); the fake model then makes one or two scripted calls. Every
proxy variable points at a closed port, so nothing reaches the internet.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.e2e.claude_code.cli import claude_bin
from tests.e2e.claude_code.hookrun import ROOT as REPO
from tests.fakes import mcp_stdio
from tests.fakes.anthropic_stream import ScriptedToolUse, fake_anthropic
from tests.policy.oracle.claude import answer_control, read_results

# The user's prompt; a request whose first message carries it is the main loop's (a
# subagent's or a title request's is not, and gets a plain text answer).
PROMPT = "Gatehouse tools oracle: make the scripted calls."
RUN_TIMEOUT = 90.0
NOTEBOOK = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@dataclass(frozen=True)
class Offer:
    """One way to start the CLI: which tools it offers then."""

    name: str
    tools: str = "default"
    env: tuple[tuple[str, str], ...] = ()
    mcp: bool = False


# Deferred tools (listed by name, loaded through ToolSearch) are sent with their schemas
# up front when tool search is off (and ToolSearch itself is gone).
UP_FRONT = ("ENABLE_TOOL_SEARCH", "false")

OFFERS = (
    Offer("default"),
    Offer("default, tool search off", env=(UP_FRONT,)),
    Offer("CLAUDE_CODE_ENABLE_TODO_TOOLS=1", env=(UP_FRONT, ("CLAUDE_CODE_ENABLE_TODO_TOOLS", "1"))),
    Offer(
        "CLAUDE_CODE_ENABLE_TODO_TOOLS=1 CLAUDE_CODE_ENABLE_TASKS=0",
        env=(UP_FRONT, ("CLAUDE_CODE_ENABLE_TODO_TOOLS", "1"), ("CLAUDE_CODE_ENABLE_TASKS", "0")),
    ),
    Offer("CLAUDE_CODE_USE_POWERSHELL_TOOL=1", env=(UP_FRONT, ("CLAUDE_CODE_USE_POWERSHELL_TOOL", "1"))),
    Offer("CLAUDE_CODE_BRIEF=1", env=(UP_FRONT, ("CLAUDE_CODE_BRIEF", "1"))),
    Offer(
        "an MCP server, CLAUDE_CODE_ENABLE_REFRESH_MCP_TOOLS=1",
        env=(UP_FRONT, ("CLAUDE_CODE_ENABLE_REFRESH_MCP_TOOLS", "1")),
        mcp=True,
    ),
    Offer("--tools Glob,Grep", tools="Glob,Grep", env=(UP_FRONT,)),
)


@dataclass(frozen=True)
class Place:
    """The temporary machine one run works in."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def project(self) -> Path:
        return self.root / "home" / "project"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    def fill(self, value: Any) -> Any:
        """``value`` with ``{project}`` and ``{outside}`` replaced by this place's directories."""
        if isinstance(value, str):
            return value.replace("{project}", str(self.project)).replace("{outside}", str(self.outside))
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        return value


@contextmanager
def place() -> Iterator[Place]:
    """A fresh home, project (a git repository with a README and a notebook) and an outside dir."""
    with tempfile.TemporaryDirectory(prefix="gatehouse-tools-") as tmp:
        where = Place(Path(tmp))
        where.project.mkdir(parents=True)
        where.outside.mkdir()
        (where.project / "README.md").write_text("readme a\n")
        (where.project / "notes.ipynb").write_text(json.dumps(NOTEBOOK))
        (where.outside / "data.txt").write_text("data a\n")
        _git(where.project, "init", "-q")
        _git(where.project, "add", ".")
        _git(where.project, "-c", "user.name=probe", "-c", "user.email=probe@example.com", "commit", "-qm", "probe")
        yield where


def _git(project: Path, *args: str) -> None:
    # EnterWorktree needs a repository with a commit to branch from.
    subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True)


def version() -> str:
    done = subprocess.run([claude_bin(), "--version"], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()[0]


@dataclass
class Run:
    """What one CLI process showed: the request bodies sent to the API and each call's outcome."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    stderr: str = ""

    def tools(self) -> dict[str, dict[str, Any]]:
        """Every tool the CLI offered the main loop, by name."""
        found: dict[str, dict[str, Any]] = {}
        for body in self.requests:
            if _main_loop(body):
                for tool in body.get("tools") or []:
                    found.setdefault(str(tool.get("name")), tool)
        return found

    def deferred(self) -> list[str]:
        """The tools the system prompt lists as loadable through ToolSearch."""
        for body in self.requests:
            if _main_loop(body):
                return _deferred_names(_all_text(body))
        return []


def _texts(blocks: object) -> list[str]:
    if isinstance(blocks, str):
        return [blocks]
    if isinstance(blocks, list):
        return [str(b.get("text")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return []


def _all_text(body: dict[str, Any]) -> str:
    parts = _texts(body.get("system"))
    for message in body.get("messages") or []:
        parts += _texts(message.get("content"))
    return "\n".join(parts)


def _deferred_names(text: str) -> list[str]:
    head = "The following deferred tools are now available via ToolSearch."
    if head not in text:
        return []
    lines = text.split(head, 1)[1].split("\n")[1:]
    names = []
    for line in lines:
        if not line.strip() or " " in line.strip():
            break
        names.append(line.strip())
    return names


def _first_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    return json.dumps(messages[0].get("content")) if messages else ""


def _main_loop(body: dict[str, Any]) -> bool:
    return bool(body.get("tools")) and PROMPT in _first_text(body)


@dataclass(frozen=True)
class Step:
    """One scripted call; ``takes`` fills input keys from the previous call's result.

    Each ``(key, pattern)`` sets ``key`` to the pattern's first group in that result's
    text (CronDelete needs the id CronCreate printed).
    """

    call: ScriptedToolUse
    takes: tuple[tuple[str, str], ...] = ()


def _results(body: dict[str, Any]) -> dict[str, str]:
    found = {}
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                found[str(block.get("tool_use_id"))] = "\n".join(_texts(block.get("content")))
    return found


def _script(steps: Sequence[Step]) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    def answer(body: dict[str, Any]) -> list[dict[str, Any]]:
        if not _main_loop(body):
            return [{"type": "text", "text": "Done."}]
        results = _results(body)
        index = next((i for i, step in enumerate(steps) if step.call.id not in results), None)
        if index is None:
            return [{"type": "text", "text": "Done."}]
        call, tool_input = steps[index].call, dict(steps[index].call.input)
        for key, pattern in steps[index].takes:
            taken = re.search(pattern, results.get(steps[index - 1].call.id, ""))
            tool_input[key] = taken.group(1) if taken else ""
        return [{"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input}]

    return answer


def _env(where: Place, api_url: str, offer: Offer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "GATEHOUSE_", "ENABLE_"))}
    env.update(
        HOME=str(where.home),
        CLAUDE_CONFIG_DIR=str(where.home / ".claude"),
        ANTHROPIC_BASE_URL=api_url,
        ANTHROPIC_API_KEY="test",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL="1",
        # Nothing leaves the machine: only 127.0.0.1 answers.
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
        PYTHONPATH=str(REPO),
    )
    env.update(dict(offer.env))
    return env


def _command(where: Place, offer: Offer, settings: dict[str, Any]) -> list[str]:
    settings_path = where.home / "gatehouse-settings.json"
    settings_path.write_text(json.dumps({"skipWebFetchPreflight": True, **settings}))
    args = [claude_bin(), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    args += ["--permission-prompt-tool", "stdio", "--settings", str(settings_path), "--tools", offer.tools]
    if offer.mcp:
        server = {"type": "stdio", "command": sys.executable, "args": ["-m", "tests.fakes.mcp_stdio"]}
        args += ["--mcp-config", json.dumps({"mcpServers": {mcp_stdio.NAME: server}}), "--strict-mcp-config"]
    return args


def run(offer: Offer, steps: Sequence[Step] = (), settings: dict[str, Any] | None = None) -> Run:
    """One CLI process: the fake model makes the steps' calls in order; each one's outcome is kept."""
    ids = {step.call.id: step.call.id for step in steps}
    with place() as where:
        placed = [Step(ScriptedToolUse(s.call.name, where.fill(s.call.input), s.call.id), s.takes) for s in steps]
        return _run_in(where, offer, placed, ids, settings or {})


def _run_in(where: Place, offer: Offer, steps: list[Step], ids: dict[str, str], settings: dict[str, Any]) -> Run:
    first = steps[0].call if steps else ScriptedToolUse("none", {})
    with fake_anthropic(first, script=_script(steps)) as api:
        found = Run()
        process = subprocess.Popen(
            _command(where, offer, settings),
            cwd=where.project,
            env=_env(where, api.url, offer),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        watchdog = threading.Timer(RUN_TIMEOUT, process.kill)
        watchdog.start()
        try:
            _converse(process, ids, found.outcomes)
        finally:
            watchdog.cancel()
            process.kill()
            found.stderr = process.stderr.read() if process.stderr else ""
            process.wait()
        found.requests = list(api.requests)
    return found


def _send(stdin: IO[str], message: dict[str, Any]) -> None:
    stdin.write(json.dumps(message) + "\n")
    stdin.flush()


def _converse(process: subprocess.Popen[str], ids: dict[str, str], outcomes: dict[str, dict[str, Any]]) -> None:
    """Until the turn ends or every call has an outcome (a wakeup or a background agent may keep it open)."""
    assert process.stdin is not None and process.stdout is not None
    user = {"role": "user", "content": PROMPT}
    _send(process.stdin, {"type": "user", "message": user, "parent_tool_use_id": None, "session_id": ""})
    for line in process.stdout:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        kind = message.get("type")
        if kind == "control_request":
            answer_control(process.stdin, message, ids, outcomes)
        elif kind == "user":
            read_results(message, ids, outcomes)
        if kind == "result" or (ids and all(i in outcomes for i in ids)):
            break
