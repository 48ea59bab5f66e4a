"""Who may call which endpoint: every persona against every API endpoint, as one table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from approvals import services
from approvals.models import Pause, Rule
from tests.approvals.conftest import ASK_CALL, Api, person_api

PERSONAS = [
    "anonymous",
    "wrong_token",
    "revoked_token",
    "agent",
    "other_agent",
    "viewer",
    "approver",
    "team_admin",
    "outsider",
    "admin",
]

# Each cell is the status code that persona gets; `{req}` and `{rule}` are fresh objects
# of the default team (ci-bot's pending request, a default-team rule) for every cell.
# The schema is public (it holds no data); a token that is sent must still be valid.
EXPECTED = """
endpoint        anonymous wrong_token revoked_token agent other_agent viewer approver team_admin outsider admin
submit          401       401         401           202   202         403    403      403        403      403
list            401       401         401           403   403         200    200      200        200      200
detail          401       401         401           202   404         202    202      202        404      202
cancel          401       401         401           200   404         403    403      403        403      403
decide          401       401         401           403   403         403    200      200        404      200
audit           401       401         401           403   403         200    200      200        200      200
analytics       401       401         401           403   403         200    200      200        200      200
pauses_list     401       401         401           403   403         200    200      200        200      200
pause_create    401       401         401           403   403         403    403      201        404      201
pause_delete    401       401         401           403   403         403    403      204        404      204
rules_list      401       401         401           403   403         200    200      200        200      200
rules_create    401       401         401           403   403         403    201      201        403      201
rule_detail     401       401         401           403   403         200    200      200        404      200
rule_update     401       401         401           403   403         403    200      200        404      200
rule_delete     401       401         401           403   403         403    204      204        404      204
rules_explain   401       401         401           403   403         200    200      200        200      200
rules_what_if   401       401         401           403   403         200    200      200        200      200
rules_suggest   401       401         401           403   403         403    200      200        200      200
autopilot_get   401       401         401           403   403         403    200      200        200      200
autopilot_put   401       401         401           403   403         403    200      200        200      200
health          401       401         401           200   200         200    200      200        200      200
schema          200       401         401           200   200         200    200      200        200      200
claude_hook     401       401         401           200   200         403    403      403        403      403
"""

ENDPOINTS: dict[str, tuple[str, str, Any]] = {
    "submit": ("post", "/api/v1/permission-requests", ASK_CALL),
    "list": ("get", "/api/v1/permission-requests?state=pending", None),
    "detail": ("get", "/api/v1/permission-requests/{req}", None),
    "cancel": ("post", "/api/v1/permission-requests/{req}/cancel", {}),
    "decide": ("post", "/api/v1/permission-requests/{req}/decision", {"behavior": "allow"}),
    "audit": ("get", "/api/v1/audit", None),
    "analytics": ("get", "/api/v1/analytics/approvers", None),
    "pauses_list": ("get", "/api/v1/pauses", None),
    "pause_create": ("post", "/api/v1/pauses", {"team": "default", "agent": "ci-bot"}),
    "pause_delete": ("delete", "/api/v1/pauses/{pause}", None),
    "rules_list": ("get", "/api/v1/rules", None),
    "rules_create": ("post", "/api/v1/rules", {"rule": "Bash(ls:*)", "behavior": "allow", "team": "default"}),
    "rule_detail": ("get", "/api/v1/rules/{rule}", None),
    "rule_update": ("patch", "/api/v1/rules/{rule}", {"note": "changed"}),
    "rule_delete": ("delete", "/api/v1/rules/{rule}", None),
    "rules_explain": ("post", "/api/v1/rules/explain", {"tool_name": "Bash", "tool_input": {"command": "ls"}}),
    "rules_what_if": ("post", "/api/v1/rules/what-if", {"since": "2000-01-01T00:00:00Z"}),
    "rules_suggest": ("get", "/api/v1/rules/suggestions", None),
    "autopilot_get": ("get", "/api/v1/rules/autopilot", None),
    "autopilot_put": ("put", "/api/v1/rules/autopilot", {"enabled": False}),
    "health": ("get", "/api/v1/health", None),
    "schema": ("get", "/api/schema/", None),
    "claude_hook": (
        "post",
        "/hooks/claude-code",
        {
            "hook_event_name": "PostToolUse",
            "session_id": "s1",
            "cwd": "/tmp/proj",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
            "tool_use_id": "matrix-hook",
            "tool_response": {"stdout": ""},
        },
    ),
}


def expected_table() -> dict[tuple[str, str], int]:
    lines = [line.split() for line in EXPECTED.strip().splitlines()]
    header = lines[0][1:]
    return {(row[0], persona): int(code) for row in lines[1:] for persona, code in zip(header, row[1:], strict=True)}


# Transactional: the Claude Code hook endpoint is async and reads through channels'
# database_sync_to_async, which closes the connection a non-transactional test needs.
@pytest.mark.django_db(transaction=True)
class RoleMatrixTests:
    def test_it_gives_every_persona_exactly_the_expected_status_on_every_endpoint(
        self,
        ci_bot: Any,
        other_bot: Any,
        alice: Any,
        bob: Any,
        carol: Any,
        mallory: Any,
        admin: Any,
        default_team: Any,
    ) -> None:
        revoked, revoked_token = services.agent_create(name="retired-bot", team=default_team)
        services.agent_revoke(agent=revoked)
        clients: dict[str, Callable[[], Api]] = {
            "anonymous": lambda: Api(),
            "wrong_token": lambda: Api({"HTTP_AUTHORIZATION": "Bearer gha_not-a-real-token"}),
            "revoked_token": lambda: Api({"HTTP_AUTHORIZATION": f"Bearer {revoked_token}"}),
            "agent": lambda: Api(ci_bot.auth),
            "other_agent": lambda: Api(other_bot.auth),
            "viewer": lambda: person_api(bob),
            "approver": lambda: person_api(alice),
            "team_admin": lambda: person_api(carol),
            "outsider": lambda: person_api(mallory),
            "admin": lambda: person_api(admin),
        }
        counter = iter(range(100_000))
        actual: dict[tuple[str, str], int] = {}
        for endpoint, (method, template, body) in ENDPOINTS.items():
            for persona in PERSONAS:
                request = services.request_submit(
                    agent=ci_bot.agent, call={**ASK_CALL, "tool_use_id": f"matrix_{next(counter)}"}
                ).request
                rule = Rule.objects.create(
                    rule="Bash(make:*)", behavior="allow", source="localSettings", team=default_team
                )
                pause = Pause.objects.create(team=default_team, answer="deny") if "{pause}" in template else None
                path = template.format(req=request.pk, rule=rule.pk, pause=pause.pk if pause else 0)
                submit_body = {**body, "tool_use_id": f"matrix_{next(counter)}"} if endpoint == "submit" else body
                response = clients[persona]().call(method, path, submit_body)
                actual[(endpoint, persona)] = response.status_code
                Pause.objects.all().delete()  # a stop switch set by one cell must not answer the next
                if response.status_code >= 400 and endpoint != "schema":
                    # Every refusal is the API's JSON error shape with a message to act on.
                    assert response.json()["error"]["message"], (endpoint, persona)
        expected = expected_table()
        wrong = {cell: (actual[cell], code) for cell, code in expected.items() if actual[cell] != code}
        assert wrong == {}, "cells as (actual, expected): " + repr(wrong)
