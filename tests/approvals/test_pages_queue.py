"""The live queue page: what each persona sees, how inputs render, and that nothing agent-supplied runs."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from approvals import services

XSS = "echo '<script>window.pwned=1</script>' && rm -rf build"


def ask(agent: Any, tool_name: str = "Bash", tool_input: dict[str, Any] | None = None, **extra: Any) -> Any:
    call = {"tool_name": tool_name, "tool_input": tool_input or {"command": "rm -rf build"}, "session_id": "s1"}
    call.update({"cwd": "/tmp/proj", **extra})
    result = services.request_submit(agent=agent, call=call)
    assert result.decision is None, "with no rules the engine must ask"
    return result.request


def unwrapped(html: str) -> str:
    """`html` without the spans that keep each word of an input whole (`cards.whole_words`)."""
    return re.sub(r'<span class="w">([^<]*)</span>', r"\1", html)


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
class QueuePageTests:
    def test_it_sends_anonymous_people_to_the_login_page(self, client: Client) -> None:
        response = client.get("/")
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")

    def test_it_shows_alice_the_card_with_buttons_and_the_count_in_the_title(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        html = client_for(alice).get("/").content.decode()
        assert f'id="req-{req.pk}"' in html
        assert "<title" in html and "(1) Queue" in html
        assert 'value="once"' in html and 'value="deny"' in html
        # A destructive call is never remembered: "Allow once" only, and the card says so.
        assert 'value="always"' not in html and 'value="session"' not in html
        assert "Only “Allow once”" in html
        assert '<span class="sh-cmd">rm</span>' in html
        assert "Destructive:" in html

    def test_it_shows_bob_the_viewer_no_buttons(self, bob: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        html = client_for(bob).get("/").content.decode()
        assert f'id="req-{req.pk}"' in html
        assert 'value="once"' not in html
        assert "approvers decide" in html

    def test_it_shows_mallory_nothing_of_another_team(self, mallory: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        html = client_for(mallory).get("/").content.decode()
        assert str(req.pk) not in html
        assert client_for(mallory).get(f"/requests/{req.pk}/").status_code == 404

    def test_it_escapes_a_script_in_a_command(self, alice: Any, ci_bot: Any) -> None:
        ask(ci_bot.agent, tool_input={"command": XSS, "description": "<img src=x onerror=alert(1)>"})
        html = client_for(alice).get("/").content.decode()
        assert "<script>window.pwned" not in html
        assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in html
        assert "<img src=x" not in html

    def test_it_renders_an_edit_as_a_diff(self, alice: Any, ci_bot: Any, tmp_path: Any) -> None:
        target = tmp_path / "app.py"
        target.write_text("a = 1\nb = 2\n")
        edit = {"file_path": str(target), "old_string": "b = 2", "new_string": "b = 3"}
        req = ask(ci_bot.agent, tool_name="Edit", tool_input=edit, cwd="/elsewhere")
        html = unwrapped(client_for(alice).get(f"/requests/{req.pk}/").content.decode())
        assert '<span class="d-del">-b = 2</span>' in html
        assert '<span class="d-add">+b = 3</span>' in html

    def test_it_renders_mcp_input_as_json_and_a_fetch_as_its_url(self, alice: Any, ci_bot: Any) -> None:
        mcp = ask(ci_bot.agent, tool_name="mcp__github__create_issue", tool_input={"title": "<b>x</b>"})
        url = {"url": "https://example.com/a?b=<c>", "prompt": "p"}
        fetch = ask(ci_bot.agent, tool_name="WebFetch", tool_input=url)
        client = client_for(alice)
        mcp_html = client.get(f"/requests/{mcp.pk}/").content.decode()
        assert "MCP server <code>github</code> tool <code>create_issue</code>" in mcp_html
        assert "&quot;title&quot;: &quot;&lt;b&gt;x&lt;/b&gt;&quot;" in unwrapped(mcp_html)
        fetch_html = client.get(f"/requests/{fetch.pk}/").content.decode()
        assert "<code>https://example.com/a?b=&lt;c&gt;</code>" in fetch_html

    def test_it_serves_pages_with_a_strict_content_security_policy(self, alice: Any) -> None:
        response = client_for(alice).get("/")
        policy = response["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy

    def test_it_serves_a_web_app_manifest(self, client: Client) -> None:
        response = client.get("/manifest.webmanifest")
        assert response.status_code == 200
        assert response.json()["start_url"] == "/"
        assert response["Content-Type"].startswith("application/manifest+json")
