"""No decision leaves the server before its audit row commits; if it cannot, the agent hears deny.

The audit write is broken for real, in the database: a trigger refuses every insert into
the audit table (on SQLite and on PostgreSQL), the way a full disk or a revoked grant would.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from approvals.models import Decision, PermissionRequest, Rule
from tests.approvals.conftest import Api

URL = "/api/v1/permission-requests"

BREAK = {
    "sqlite": [
        "CREATE TRIGGER gh_test_audit_down BEFORE INSERT ON approvals_decision "
        "BEGIN SELECT RAISE(ABORT, 'audit storage unavailable'); END;"
    ],
    "postgresql": [
        "CREATE FUNCTION gh_test_audit_down() RETURNS trigger AS $$ BEGIN "
        "RAISE EXCEPTION 'audit storage unavailable'; END; $$ LANGUAGE plpgsql;",
        "CREATE TRIGGER gh_test_audit_down BEFORE INSERT ON approvals_decision "
        "FOR EACH ROW EXECUTE FUNCTION gh_test_audit_down();",
    ],
}
MEND = {
    "sqlite": ["DROP TRIGGER gh_test_audit_down;"],
    "postgresql": ["DROP TRIGGER gh_test_audit_down ON approvals_decision;", "DROP FUNCTION gh_test_audit_down();"],
}


def run(statements: list[str]) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


@pytest.fixture
def audit_down(db: None) -> Iterator[Any]:
    """Break audit inserts in the database; yield a function that mends them."""
    run(BREAK[connection.vendor])
    mended = False

    def mend() -> None:
        nonlocal mended
        if not mended:
            run(MEND[connection.vendor])
            mended = True

    yield mend
    mend()


@pytest.mark.django_db
class AuditBeforeReleaseTests:
    def test_it_denies_a_call_a_rule_would_allow_when_the_audit_fails(
        self, ci_bot: Any, default_team: Any, audit_down: Any
    ) -> None:
        Rule.objects.create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=default_team)
        response = Api(ci_bot.auth).post(URL, {"tool_name": "Bash", "tool_input": {"command": "git status"}})
        assert response.status_code == 503
        body = response.json()
        assert body["decision"]["behavior"] == "deny"
        assert body["decision"]["reason"] == {"type": "other", "detail": "audit unavailable"}
        assert "allow" not in response.content.decode().replace('"allow"', "")  # no allow anywhere but rule text
        assert body["error"]["code"] == "audit_unavailable"
        # Nothing half-written: no request the agent could later read as allowed.
        assert not PermissionRequest.objects.exists()

    def test_it_decides_normally_once_the_audit_is_back(self, ci_bot: Any, default_team: Any, audit_down: Any) -> None:
        Rule.objects.create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=default_team)
        call = {"tool_name": "Bash", "tool_input": {"command": "git status"}, "tool_use_id": "toolu_retry"}
        assert Api(ci_bot.auth).post(URL, call).status_code == 503
        audit_down()
        response = Api(ci_bot.auth).post(URL, call)
        assert response.status_code == 200
        assert response.json()["decision"]["behavior"] == "allow"
        assert Decision.objects.count() == 1

    def test_it_keeps_the_request_pending_when_a_humans_allow_cannot_be_recorded(
        self, api_as: Any, alice: Any, ci_bot: Any, pending: Any, audit_down: Any
    ) -> None:
        request = pending()
        decide = f"/api/v1/permission-requests/{request.pk}/decision"
        response = api_as(alice).post(decide, {"behavior": "allow"})
        assert response.status_code == 503
        assert response.json()["decision"]["behavior"] == "deny"
        request.refresh_from_db()
        assert request.state == "pending"  # not lost: it can still be answered
        polled = Api(ci_bot.auth).get(f"{URL}/{request.pk}")
        assert polled.status_code == 202
        assert polled.json()["decision"] is None
        audit_down()
        assert api_as(alice).post(decide, {"behavior": "allow"}).status_code == 200
        assert Api(ci_bot.auth).get(f"{URL}/{request.pk}").json()["decision"]["behavior"] == "allow"

    def test_it_keeps_the_request_pending_when_a_cancel_cannot_be_recorded(
        self, ci_bot: Any, pending: Any, audit_down: Any
    ) -> None:
        request = pending()
        response = Api(ci_bot.auth).post(f"{URL}/{request.pk}/cancel")
        assert response.status_code == 503
        request.refresh_from_db()
        assert request.state == "pending"
