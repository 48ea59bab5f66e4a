"""Agent facts over the API: accepted strictly, stored with the request, decided on."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from approvals.models import PermissionRequest, Rule
from tests.approvals.conftest import Api

URL = "/api/v1/permission-requests"
HOOK_URL = "/hooks/claude-code"
CWD = "/home/alice/project"
EDIT = {"file_path": "src/app.py", "old_string": "a = 1", "new_string": "a = 2"}
FACTS = {
    "home": "/home/alice",
    "user": "alice",
    "paths": {
        CWD: {"real": CWD, "exists": True, "dir": True},
        f"{CWD}/src/app.py": {"real": f"{CWD}/src/app.py", "exists": True, "dir": False},
    },
    "truncated": False,
}


def _submit(api: Api, **extra: Any) -> Any:
    return api.post(URL, {"tool_name": "Edit", "tool_input": EDIT, "cwd": CWD, **extra})


@pytest.mark.django_db
class SubmitWithFactsTests:
    def test_it_allows_an_edit_of_a_file_only_the_agent_can_see(self, ci_bot: Any, default_team: Any) -> None:
        Rule.objects.create(rule="Edit(src/**)", behavior="allow", source="projectSettings", team=default_team)
        response = _submit(Api(ci_bot.auth), facts=FACTS)
        assert response.status_code == 200, response.content
        assert response.json()["decision"]["behavior"] == "allow"
        assert PermissionRequest.objects.get(pk=response.json()["id"]).facts == FACTS

    def test_it_asks_without_facts_and_says_why(self, ci_bot: Any, default_team: Any) -> None:
        Rule.objects.create(rule="Edit(src/**)", behavior="allow", source="projectSettings", team=default_team)
        response = _submit(Api(ci_bot.auth))
        assert response.status_code == 202, response.content
        stored = PermissionRequest.objects.get(pk=response.json()["id"])
        assert stored.facts is None
        assert "the agent did not report" in stored.evaluation["message"]

    def test_it_denies_a_home_key_under_the_reported_home(self, ci_bot: Any, default_team: Any) -> None:
        Rule.objects.create(rule="Read(~/.ssh/**)", behavior="deny", source="policySettings", team=default_team)
        key = "/home/alice/.ssh/id_rsa"
        facts = {**FACTS, "paths": {key: {"real": key, "exists": True, "dir": False}}}
        response = Api(ci_bot.auth).post(
            URL, {"tool_name": "Read", "tool_input": {"file_path": key}, "cwd": CWD, "facts": facts}
        )
        assert response.json()["decision"]["behavior"] == "deny", response.content


BAD_FACTS: list[Any] = [
    "x",
    {"home": "not/absolute"},
    {"paths": {"relative/path": {}}},
    {"paths": {"/a": {"real": 5}}},
    {"paths": {"/a": {"exists": "yes"}}},
    {"paths": {f"/p{i}": {} for i in range(513)}},
    {"surprise": True},
]


@pytest.mark.django_db(transaction=True)  # the hook endpoint is async: its own connection
class BadFactsTests:
    @pytest.mark.parametrize("facts", BAD_FACTS)
    def test_it_answers_400_on_the_rest_submit(self, ci_bot: Any, facts: Any) -> None:
        response = _submit(Api(ci_bot.auth), facts=facts)
        assert response.status_code == 400, response.content
        assert "facts" in response.content.decode()
        assert not PermissionRequest.objects.exists()

    @pytest.mark.parametrize("facts", BAD_FACTS)
    def test_it_answers_400_on_the_claude_code_hook(self, ci_bot: Any, facts: Any) -> None:
        body = {
            "hook_event_name": "PreToolUse",
            "tool_name": "Edit",
            "tool_input": EDIT,
            "tool_use_id": "toolu_1",
            "cwd": CWD,
            "facts": facts,
        }
        response = Api(ci_bot.auth).post(HOOK_URL, body)
        assert response.status_code == 400, response.content
        assert "facts" in response.content.decode()
        assert not PermissionRequest.objects.exists()


@pytest.mark.django_db
class FactsOnTheDetailPageTests:
    def test_it_shows_the_reported_facts_escaped(self, alice: Any, ci_bot: Any) -> None:
        hostile = "/home/alice/<script>window.pwned=1</script>"
        facts = {**FACTS, "paths": {hostile: {"real": "/etc/<b>x</b>", "exists": True, "dir": False}}}
        response = _submit(Api(ci_bot.auth), facts=facts, tool_input={**EDIT, "file_path": hostile})
        client = Client()
        client.force_login(alice)
        html = client.get(f"/requests/{response.json()['id']}/").content.decode()
        assert "Agent facts" in html and "/home/alice" in html
        assert "<script>window.pwned" not in html and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in html
        assert "&lt;b&gt;x&lt;/b&gt;" in html

    def test_it_says_when_the_agent_reported_nothing(self, alice: Any, ci_bot: Any) -> None:
        response = _submit(Api(ci_bot.auth))
        client = Client()
        client.force_login(alice)
        html = client.get(f"/requests/{response.json()['id']}/").content.decode()
        assert "The agent reported nothing about its machine" in html
