"""AskUserQuestion answered in Gatehouse, with the real Claude Code 2.1.332.

The model asks one question; Gatehouse's PreToolUse hook waits for a person, who answers
through `POST …/decision` with `answers`. Claude Code runs the tool with those answers,
tells the model "Your questions have been answered: …", and never asks its own client.
`claude -p` alone turns AskUserQuestion off, so the CLI runs as the SDK drives it
(stream-json, `--permission-prompt-tool stdio`), where the tool is on.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.claude_code.cli import claude_bin, hook_command, hook_settings, run_claude_streaming
from tests.e2e.claude_code.hookrun import pending_request, wait_until
from tests.fakes.anthropic_stream import ScriptedToolUse, _tool_results, fake_anthropic
from tests.live import LiveServer, live_server

pytestmark = [pytest.mark.claude_cli, pytest.mark.django_db(transaction=True)]

DB = "Which database should we use?"
QUESTIONS = [
    {
        "question": DB,
        "header": "Database",
        "options": [{"label": "PostgreSQL", "description": "a server"}, {"label": "SQLite", "description": "a file"}],
        "multiSelect": False,
    }
]


@pytest.fixture(autouse=True, scope="module")
def _claude_installed() -> None:
    if not os.path.exists(claude_bin()):
        pytest.fail(f"the Claude Code CLI is missing at {claude_bin()}: `make test` installs it")


@pytest.fixture
def server() -> Iterator[LiveServer]:
    with live_server() as srv:
        yield srv


def answer_when_pending(server: LiveServer, token: str, body: dict[str, Any]) -> threading.Thread:
    """A person answers the first pending request through the API, from another thread."""

    def run() -> None:
        request = wait_until(pending_request, timeout=60, what="the question to be pending")
        httpx.post(
            f"{server.url}/api/v1/permission-requests/{request.pk}/decision",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        ).raise_for_status()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


class RemoteAnswerTests:
    def test_the_persons_answer_reaches_the_model_and_the_terminal_never_asks(
        self, server: LiveServer, tmp_path: Path, ci_bot: Any, alice: Any
    ) -> None:
        from approvals import services
        from approvals.models import Decision

        person_token = services.personal_token_create(user=alice)
        project = tmp_path / "project"
        project.mkdir()
        answerer = answer_when_pending(server, person_token, {"behavior": "allow", "answers": {DB: "SQLite"}})
        ask = ScriptedToolUse("AskUserQuestion", {"questions": QUESTIONS})

        def script(body: dict[str, Any]) -> list[dict[str, Any]] | None:
            # AskUserQuestion is one of 2.1.332's deferred tools (not in the request's
            # tool list until searched for), and a model may call it all the same.
            if not any(t.get("name") == "Bash" for t in body.get("tools") or []):
                return None
            if ask.id in {r.get("tool_use_id") for r in _tool_results(body)}:
                return [{"type": "text", "text": "Thanks."}]
            return [{"type": "tool_use", "id": ask.id, "name": ask.name, "input": ask.input}]

        with fake_anthropic(ask, script=script) as fake:
            run = run_claude_streaming(
                fake, tmp_path / "home", project, hook_settings(hook_command(server.url)), token=ci_bot.token
            )
        answerer.join(timeout=5)
        assert run.returncode == 0, run.stderr
        assert not fake.tool_result_is_error(), fake.tool_result_text()
        assert f'"{DB}"="SQLite"' in fake.tool_result_text()
        assert [p for p in run.control_requests if p.get("request", {}).get("subtype") == "can_use_tool"] == []
        [row] = Decision.objects.all()
        assert row.behavior == "allow" and row.decided_by == "alice"
        assert row.updated_input == {"questions": QUESTIONS, "answers": {DB: "SQLite"}}
