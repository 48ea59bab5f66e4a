"""The agents page: register (token shown once), revoke, and the Claude Code hook snippet."""

from __future__ import annotations

import html as html_lib
import json
import re
from typing import Any

import pytest
from django.test import Client

from approvals.auth import AgentPrincipal, authenticate_token
from approvals.models import Agent


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
class AgentsPageTests:
    def test_it_registers_an_agent_and_shows_a_working_token_once(self, alice: Any, default_team: Any) -> None:
        client = client_for(alice)
        response = client.post("/agents/", {"name": "laptop", "team": default_team.pk, "mode": "acceptEdits"})
        assert response.status_code == 200
        assert response["Cache-Control"] == "no-store"
        token = re.search(r'<code id="token-value">([^<]+)</code>', response.content.decode())
        assert token is not None
        principal = authenticate_token(token.group(1))
        assert isinstance(principal, AgentPrincipal) and principal.agent.name == "laptop"
        assert principal.agent.default_mode == "acceptEdits"
        assert token.group(1) not in client.get("/agents/").content.decode()

    def test_it_refuses_a_duplicate_name_with_a_message(self, alice: Any, ci_bot: Any, default_team: Any) -> None:
        response = client_for(alice).post("/agents/", {"name": "ci-bot", "team": default_team.pk, "mode": "default"})
        assert response.status_code == 400
        assert "already exists" in response.content.decode()

    def test_it_revokes_an_agent(self, alice: Any, ci_bot: Any) -> None:
        assert client_for(alice).post(f"/agents/{ci_bot.agent.pk}/revoke/").status_code == 302
        assert authenticate_token(ci_bot.token) is None

    def test_it_refuses_bob_registering_or_revoking(self, bob: Any, ci_bot: Any, default_team: Any) -> None:
        client = client_for(bob)
        assert client.post("/agents/", {"name": "x", "team": default_team.pk, "mode": "default"}).status_code == 403
        assert client.post(f"/agents/{ci_bot.agent.pk}/revoke/").status_code == 403
        assert Agent.objects.get(pk=ci_bot.agent.pk).revoked_at is None

    def test_it_hides_another_teams_agents_from_mallory(self, mallory: Any, ci_bot: Any) -> None:
        client = client_for(mallory)
        assert "ci-bot" not in client.get("/agents/").content.decode()
        assert client.post(f"/agents/{ci_bot.agent.pk}/revoke/").status_code == 404

    def test_it_shows_a_hook_snippet_claude_code_accepts(self, alice: Any) -> None:
        html = client_for(alice).get("/agents/").content.decode()
        snippet = re.search(r'<pre class="json" id="hook-snippet">(.*?)</pre>', html, re.S)
        assert snippet is not None
        settings = json.loads(html_lib.unescape(snippet.group(1)))
        hook = settings["hooks"]["PreToolUse"][0]
        assert hook["matcher"] == "*"
        command = hook["hooks"][0]["command"]
        # The checkout by its absolute path (runs outside the project), this server's URL.
        assert "from agent.hook import main; main()' --server http://testserver " in command
        assert hook["hooks"][0]["onFailure"] == "block"

    def test_its_snippet_runs_from_another_directory(self, alice: Any, ci_bot: Any, tmp_path: Any) -> None:
        import subprocess

        from tests.e2e.claude_code.hookrun import hook_input
        from tests.live import free_port

        html = client_for(alice).get("/agents/").content.decode()
        snippet = re.search(r'<pre class="json" id="hook-snippet">(.*?)</pre>', html, re.S)
        assert snippet is not None
        command = json.loads(html_lib.unescape(snippet.group(1)))["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        (tmp_path / ".config").mkdir()
        (tmp_path / ".config" / "gatehouse-token").write_text(ci_bot.token)
        down = command.replace("http://testserver", f"http://127.0.0.1:{free_port()}")
        done = subprocess.run(
            ["sh", "-c", down],
            input=json.dumps(hook_input("PreToolUse")),
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "No module named" not in done.stderr, done.stderr
        assert done.stdout, (down, done.stderr)
        assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "ask"  # unreachable
