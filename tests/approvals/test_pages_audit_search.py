"""The audit page: a search box, and each row's command or target with its message."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from approvals import services


def page(user: Any, query: str = "") -> str:
    client = Client()
    client.force_login(user)
    response = client.get("/audit/" + query)
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def history(ci_bot: Any, alice: Any, default_team: Any, pending: Any) -> None:
    request = pending(tool_input={"command": "make deploy --prod"})
    services.request_decide(
        request.pk, services.Answer(behavior="deny", surface="web", user=alice, message="Not from CI")
    )
    services.rule_create(rule="Bash(npm publish:*)", behavior="deny", source="policySettings", team=default_team)
    call = {"tool_name": "Bash", "tool_input": {"command": "npm publish <b>x</b>"}, "cwd": "/tmp/proj"}
    assert services.request_submit(agent=ci_bot.agent, call=call).decision is not None


@pytest.mark.django_db
class AuditPageSearchTests:
    def test_it_shows_each_rows_command_and_message(self, alice: Any, history: None) -> None:
        html = page(alice)
        assert '<code class="subject">make deploy --prod</code><span class="message">Not from CI</span>' in html
        assert '<code class="subject">npm publish &lt;b&gt;x&lt;/b&gt;</code>' in html
        assert 'role="search"' in html and 'name="q"' in html

    def test_it_finds_rows_by_a_case_insensitive_part_of_the_command(self, alice: Any, history: None) -> None:
        html = page(alice, "?q=MAKE+DEPLOY")
        assert "make deploy --prod" in html and "npm publish" not in html
        assert 'value="MAKE DEPLOY"' in html
        assert "/api/v1/audit?q=MAKE+DEPLOY&amp;format=csv" in html

    def test_it_finds_rows_by_their_message(self, alice: Any, history: None) -> None:
        html = page(alice, "?q=from+ci")
        assert "make deploy --prod" in html and "npm publish" not in html

    def test_it_keeps_the_search_inside_the_other_filters(self, alice: Any, history: None) -> None:
        html = page(alice, "?q=npm&behavior=allow")
        assert "No audit rows match “npm”." in html
        assert '<input type="hidden" name="behavior" value="allow">' in html

    def test_it_says_so_when_nothing_matches(self, alice: Any, history: None) -> None:
        assert "No audit rows match “zzz”." in page(alice, "?q=zzz")


@pytest.mark.django_db
class AuditTimesTests:
    def test_it_shows_times_in_human_units_without_microseconds(self, alice: Any, history: None) -> None:
        import re

        from approvals.models import Decision

        row = Decision.objects.filter(reason_type="user").get()
        html = page(alice, "").replace("\n", " ")
        assert re.search(r"<time [^>]*>(just now|\d+ s ago)</time>", html)
        client = Client()
        client.force_login(alice)
        detail = client.get(f"/audit/{row.pk}/").content.decode()
        assert re.search(r"\d{2}:\d{2}:\d{2} UTC</time>", detail)
        shown = re.sub(r"<[^>]+>", " ", detail)  # machine-readable datetime attributes aside
        assert not re.search(r"\d{2}:\d{2}:\d{2}\.\d{6}", shown), "no microseconds"
        assert re.search(r"<dt>Latency</dt><dd>\d+(\.\d)? (ms|s)", detail)
