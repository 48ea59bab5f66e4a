"""The request card answers what, where, why and how risky, and names its request in every control."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from approvals import services

PRIVATE_URLS = [
    "http://127.0.0.1/admin",
    "http://localhost:8000/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://127.1/",
    "http://10.0.0.5/",
    "http://172.16.3.4/",
    "http://192.168.1.1/router",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]:8080/",
    "http://[fd00::1]/",
    "http://printer.local/",
    "http://192\u3002168\u30021\u30021/",
    "http://127\uff0e0\uff0e0\uff0e1/",
    "http://\uff11\uff12\uff17.0.0.1/",
    "http://127.0.0.1\\@example.com/",
    "http://0.0.0.0:3000/",
]
PUBLIC_URLS = [
    "https://example.com/",
    "http://8.8.8.8/",
    "https://docs.python.org/3/",
    "http://example.com\\@127.0.0.1/",
]


def ask(agent: Any, tool_name: str = "Bash", tool_input: dict[str, Any] | None = None, **extra: Any) -> Any:
    call = {"tool_name": tool_name, "tool_input": tool_input or {"command": "npm publish"}, "session_id": "s1"}
    call.update({"cwd": "/tmp/proj", **extra})
    result = services.request_submit(agent=agent, call=call)
    assert result.decision is None, "the engine must ask for this call"
    return result.request


def card_html(user: Any, req: Any) -> str:
    client = Client()
    client.force_login(user)
    html = client.get(f"/requests/{req.pk}/").content.decode()
    match = re.search(r'<article class="card.*?</article>', html, re.S)
    assert match, "the request page shows the card"
    return match.group()


def first_decision_button(html: str) -> str:
    buttons = re.search(r'<div class="buttons">(.*?)</div>', html, re.S)
    assert buttons
    first = re.search(r'value="(\w+)"', buttons.group(1))
    assert first
    return first.group(1)


@pytest.mark.django_db
class CardWhyTests:
    def test_it_says_no_rule_allows_the_command_and_names_the_nearest_rule(self, alice: Any, ci_bot: Any) -> None:
        team = ci_bot.agent.team
        services.rule_create(rule="Bash(npm run test:*)", behavior="allow", source="projectSettings", team=team)
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=team)
        html = card_html(alice, ask(ci_bot.agent))
        assert "no rule allows <code>npm publish</code>; nearest rule <code>Bash(npm run test:*)</code>" in html

    def test_it_names_no_nearest_rule_when_none_shares_a_word(self, alice: Any, ci_bot: Any) -> None:
        team = ci_bot.agent.team
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=team)
        html = card_html(alice, ask(ci_bot.agent))
        assert "no rule allows <code>npm publish</code>" in html
        assert "nearest rule" not in html

    def test_it_names_the_ask_rule_that_asked(self, alice: Any, ci_bot: Any) -> None:
        team = ci_bot.agent.team
        services.rule_create(rule="Bash(npm publish:*)", behavior="ask", source="policySettings", team=team)
        html = card_html(alice, ask(ci_bot.agent))
        assert "the rule <code>Bash(npm publish:*)</code> (policySettings) asks a person for this call" in html

    def test_it_says_which_path_lies_outside_the_working_directories(self, alice: Any, ci_bot: Any) -> None:
        html = card_html(alice, ask(ci_bot.agent, "Read", {"file_path": "/etc/hosts"}))
        assert "Why asked" in html and "/etc/hosts is outside the working directories" in html


@pytest.mark.django_db
class CardPrivateFetchTests:
    @pytest.mark.parametrize("url", PRIVATE_URLS)
    def test_it_warns_of_a_fetch_to_this_machine_or_the_local_network(self, alice: Any, ci_bot: Any, url: str) -> None:
        html = card_html(alice, ask(ci_bot.agent, "WebFetch", {"url": url, "prompt": "read it"}))
        assert "Private address:" in html, url

    @pytest.mark.parametrize("url", PUBLIC_URLS)
    def test_it_does_not_warn_of_a_public_address(self, alice: Any, ci_bot: Any, url: str) -> None:
        html = card_html(alice, ask(ci_bot.agent, "WebFetch", {"url": url, "prompt": "read it"}))
        assert "Private address:" not in html, url


@pytest.mark.django_db
class CardControlsTests:
    def test_it_leads_a_destructive_card_with_deny(self, alice: Any, ci_bot: Any) -> None:
        html = card_html(alice, ask(ci_bot.agent, tool_input={"command": "rm -rf build"}))
        assert "Destructive:" in html
        assert first_decision_button(html) == "deny"

    def test_it_leads_an_ordinary_card_with_allow(self, alice: Any, ci_bot: Any) -> None:
        html = card_html(alice, ask(ci_bot.agent))
        assert first_decision_button(html) == "once"

    def test_it_names_the_request_in_every_control(self, alice: Any, ci_bot: Any) -> None:
        html = card_html(alice, ask(ci_bot.agent))
        for control in ("Allow once", "Deny", "Allow for session", "Details", "Reason for denying"):
            assert f'aria-label="{control}' in html
        assert html.count("Bash npm publish") >= 5
        assert 'aria-label="Allow for session: Bash npm publish, saves Bash(npm publish:*)"' in html

    def test_it_says_what_allow_for_session_saves(self, alice: Any, ci_bot: Any) -> None:
        html = card_html(alice, ask(ci_bot.agent))
        assert "saves <code>Bash(npm publish:*)</code> for this session" in html

    def test_it_gives_the_request_page_a_heading(self, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        client = Client()
        client.force_login(alice)
        html = client.get(f"/requests/{req.pk}/").content.decode()
        assert "<h1>Bash request from ci-bot</h1>" in html
        assert '<a class="skip" href="#main">Skip to content</a>' in html and 'id="main"' in html

    def test_it_counts_every_pending_request_in_the_nav_on_a_request_page(self, alice: Any, ci_bot: Any) -> None:
        requests = [ask(ci_bot.agent, tool_input={"command": f"npm publish --tag t{i}"}) for i in range(6)]
        client = Client()
        client.force_login(alice)
        html = client.get(f"/requests/{requests[0].pk}/").content.decode()
        assert 'id="nav-count" data-count="6">6</span>' in html

    def test_it_says_how_long_is_left_in_human_units(self, alice: Any, ci_bot: Any) -> None:
        html = card_html(alice, ask(ci_bot.agent))
        assert re.search(r'class="countdown"[^>]*>[45] min( \d+ s)? left<', html)
