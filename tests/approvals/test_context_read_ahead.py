"""A submit's context read with the agent's token: one round trip, and only for its own call.

The API's submit and the Claude Code hook's PreToolUse send the call's context read
(`services.context_reads_ahead`) with the token's, before the token is known good and
before the body is validated. Its rows decide a call only when they were read for that
very agent and call; anything else is read again, and bad input is refused as before.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from approvals import selectors, services
from approvals.models import Decision, PermissionRequest, SessionDenials
from approvals.written import run_together
from tests.approvals.conftest import ASK_CALL, Api
from tests.conftest import AgentPersona
from tests.e2e.claude_code.hookrun import hook_input
from tests.round_trips import round_trips

URL = "/api/v1/permission-requests"
HOOK = "/hooks/claude-code"
CALL = {"tool_name": "Bash", "tool_input": {"command": "git status"}, "session_id": "s1", "cwd": "/srv/app"}
HOOK_CALL = hook_input("PreToolUse", "git status", session="s1", cwd="/srv/app")


def _reads(trips: list[list[str]], table: str) -> list[str]:
    return [sql for trip in trips for sql in trip if sql.lstrip().startswith("SELECT") and table in sql]


def _context(agent: Any, read_ahead: Any = None, **key: Any) -> dict[str, Any]:
    call = {
        "tool_use_id": "t-old",
        "session_id": "s1",
        "pending_limit": settings.GATEHOUSE_MAX_PENDING_PER_AGENT,
        **key,
    }
    context = selectors.submit_context(agent=agent, read_ahead=read_ahead, **call)
    found = asdict(context)
    found["team_settings"] = (context.team_settings.team_id, context.team_settings.pk)
    return found


@pytest.mark.django_db(transaction=True)
class OneRoundTripTests:
    @pytest.fixture(autouse=True)
    def allow_git_status(self, default_team: Any) -> None:
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=default_team)

    @pytest.mark.parametrize(("url", "body"), [(URL, CALL), (HOOK, HOOK_CALL)], ids=["api", "hook"])
    def test_the_token_and_the_calls_context_are_read_together(self, ci_bot: Any, url: str, body: Any) -> None:
        api = Api(ci_bot.auth)
        api.post(url, {**body, "tool_use_id": "toolu_warm"})  # rules and webhooks cached for the version
        with round_trips() as trips:
            response = api.post(url, {**body, "tool_use_id": "toolu_1"})
        assert response.status_code == 200, response.content
        tokens, contexts = _reads(trips, 'FROM "approvals_agent"'), _reads(trips, "approvals_teamsettings")
        assert len(tokens) == 1 and len(contexts) == 1, trips
        assert "token_hash" in contexts[0], contexts  # read for the agent the token names
        if connection.vendor == "postgresql":
            # The token's read and the context: one round trip; then the audit row's message.
            [first] = [trip for trip in trips if tokens[0] in trip]
            assert contexts[0] in first, trips
            assert len(trips) == 2, trips
        assert Decision.objects.get(request__tool_use_id="toolu_1").behavior == "allow"

    def test_a_socket_or_service_call_reads_its_context_by_the_agent(self, ci_bot: Any) -> None:
        with round_trips() as trips:
            services.request_submit(agent=ci_bot.agent, call={**CALL, "tool_use_id": "toolu_1"})
        [context] = _reads(trips, "approvals_teamsettings")
        assert "token_hash" not in context


# Each way the rows read ahead can belong to another agent or call than the one submitted.
OTHER = ["agent", "team", "tool_use_id", "session_id", "pending_limit"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("other", OTHER)
def test_rows_read_for_another_agent_or_call_are_read_again(other: str, ci_bot: Any, other_team: Any) -> None:
    agent = ci_bot.agent
    SessionDenials.objects.create(agent=agent, session_id="s1", state={"consecutive": 2, "total": 3})
    services.request_submit(agent=agent, call={**CALL, "tool_use_id": "t-old"})
    for n in range(3):
        services.request_submit(agent=agent, call={**ASK_CALL, "tool_use_id": f"ask-{n}"})
    key: dict[str, Any] = {
        "tool_use_id": "t-old",
        "session_id": "s1",
        "pending_limit": settings.GATEHOUSE_MAX_PENDING_PER_AGENT,
    }
    if other in key:
        key[other] = {"tool_use_id": "t-new", "session_id": "s2", "pending_limit": 2}[other]
    bot = ci_bot
    if other == "agent":  # another agent of the same team
        bot = AgentPersona(*services.agent_create(name="second-bot", team=agent.team))
    claimed = _context(bot.agent, **key)  # what the rows read ahead say
    statement = selectors.submit_context_statement(**key, token_digest=services.token_hash(bot.token))
    [rows] = run_together([statement])
    if other == "team":  # the agent moved after its rows were read
        type(agent).objects.filter(pk=agent.pk).update(team=other_team)
        agent.refresh_from_db()
    truth = _context(agent)
    assert claimed != truth
    with round_trips() as trips:
        assert _context(agent, rows) == truth
    assert len(_reads(trips, "approvals_teamsettings")) == 1, trips  # read again, for this call


@pytest.mark.django_db(transaction=True)
def test_rows_read_for_this_very_call_are_used(ci_bot: Any) -> None:
    agent = ci_bot.agent
    SessionDenials.objects.create(agent=agent, session_id="s1", state={"consecutive": 2, "total": 3})
    [statement] = services.context_reads_ahead(
        {"tool_use_id": "t-old", "session_id": "s1"}, services.token_hash(ci_bot.token)
    )
    [rows] = run_together([statement])
    with round_trips() as trips:
        assert _context(agent, rows) == _context(agent)
    assert len(_reads(trips, "approvals_teamsettings")) == 1, trips  # only the fresh read's


# Bodies the context cannot be read ahead for, or that validation reads otherwise: each is
# answered as it would be without the read ahead (status, and what was stored).
BODIES: list[tuple[str, Any, int]] = [
    ("no tool_use_id", {**CALL}, 200),
    ("an empty tool_use_id", {**CALL, "tool_use_id": ""}, 200),
    ("padded ids", {**CALL, "tool_use_id": "  toolu_pad  ", "session_id": " s1 "}, 200),
    ("a session id that is a number", {**CALL, "tool_use_id": "toolu_n", "session_id": 7}, 400),
    ("a NUL in the session id", {**CALL, "tool_use_id": "toolu_nul", "session_id": "s\x001"}, 400),
    ("a NUL in the tool_use_id", {**CALL, "tool_use_id": "toolu\x00nul"}, 400),
    ("a tool_use_id too long", {**CALL, "tool_use_id": "t" * 201}, 400),
    ("a lone surrogate", '{"tool_name": "Bash", "tool_use_id": "\\ud800", "tool_input": {}}', 400),
    ("not JSON", '{"tool_name": "Bash", "tool_use_id": "t1",', 400),
    ("a JSON list", [CALL], 400),
    ("a body over the read-ahead size", {**CALL, "tool_use_id": "toolu_big", "cwd": "/" + "d" * 70_000}, 400),
    (
        "a large body within the limits",
        {**CALL, "tool_use_id": "toolu_big2", "tool_input": {"command": "git status", "description": "y" * 70_000}},
        200,
    ),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("body", "status"), [(b, s) for _, b, s in BODIES], ids=[name for name, _, _ in BODIES])
def test_every_body_is_answered_as_validation_says(ci_bot: Any, default_team: Any, body: Any, status: int) -> None:
    services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=default_team)
    response = Api(ci_bot.auth).post(URL, body)
    assert response.status_code == status, response.content
    if status == 200:
        stored = PermissionRequest.objects.get(pk=response.json()["id"])
        sent = body if isinstance(body, dict) else {}
        assert stored.tool_use_id == (sent.get("tool_use_id") or "").strip() or stored.tool_use_id.startswith("gh_")
        assert Decision.objects.get(request=stored).behavior == "allow"
    else:
        assert "error" in response.json()
        assert not PermissionRequest.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("url", [URL, HOOK])
@pytest.mark.parametrize("dead", ["revoked", "unknown", "a person's"])
def test_a_dead_or_wrong_token_gets_no_context_and_decides_nothing(
    ci_bot: Any, alice: Any, url: str, dead: str
) -> None:
    token = ci_bot.token
    if dead == "revoked":
        services.agent_revoke(agent=ci_bot.agent)
    elif dead == "unknown":
        token = token[:-1] + ("A" if token[-1] != "A" else "B")
    else:
        token = services.personal_token_create(user=alice)
    body = {**(HOOK_CALL if url == HOOK else CALL), "tool_use_id": "toolu_dead"}
    for sent in (body, json.dumps(body)[:-3]):  # the same answer for a good and a broken body
        response = Api({"HTTP_AUTHORIZATION": f"Bearer {token}"}).post(url, sent)
        assert response.status_code == (403 if dead == "a person's" else 401), response.content
    assert not PermissionRequest.objects.exists()
