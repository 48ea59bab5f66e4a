"""The audit log page: filters, export links, and the detail with trace and hash-chain status."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from approvals import services
from approvals.models import Decision
from tests.approvals.audit_helpers import tamper


def decided(agent: Any, user: Any, command: str, behavior: str) -> Decision:
    call = {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": "s-audit", "cwd": "/tmp/proj"}
    req = services.request_submit(agent=agent, call=call).request
    result = services.request_decide(req.pk, services.Answer(behavior=behavior, surface="web", user=user))
    assert result.decision is not None
    return result.decision


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
class AuditPageTests:
    def test_it_lists_rows_and_filters_by_behavior(self, alice: Any, ci_bot: Any) -> None:
        allowed = decided(ci_bot.agent, alice, "make build", "allow")
        denied = decided(ci_bot.agent, alice, "rm -rf /", "deny")
        client = client_for(alice)
        html = client.get("/audit/").content.decode()
        assert f"/audit/{allowed.pk}/" in html and f"/audit/{denied.pk}/" in html
        only_denied = client.get("/audit/?behavior=deny").content.decode()
        assert f"/audit/{denied.pk}/" in only_denied and f"/audit/{allowed.pk}/" not in only_denied

    def test_it_links_exports_with_the_same_filters(self, alice: Any, ci_bot: Any) -> None:
        html = client_for(alice).get("/audit/?behavior=deny&agent=ci-bot").content.decode()
        assert "/api/v1/audit?agent=ci-bot&amp;behavior=deny&amp;format=csv" in html
        assert "/api/v1/audit?agent=ci-bot&amp;behavior=deny&amp;format=jsonl" in html

    def test_it_shows_the_trace_timing_and_an_intact_chain(self, alice: Any, ci_bot: Any) -> None:
        row = decided(ci_bot.agent, alice, "make build", "allow")
        html = client_for(alice).get(f"/audit/{row.pk}/").content.decode()
        assert "Decision trace" in html and "denyRules" in html and "resolveAsk" in html
        assert "Intact" in html
        assert "alice via web" in html
        assert '<span class="sh-cmd">make</span>' in html

    def test_it_reports_an_edited_row_as_broken(self, alice: Any, ci_bot: Any) -> None:
        row = decided(ci_bot.agent, alice, "make build", "allow")
        table = Decision._meta.db_table
        # Tamper below the ORM, the way an attacker with database access would.
        with tamper() as cursor:
            cursor.execute(f"UPDATE {table} SET behavior = 'deny' WHERE id = %s", [row.pk])  # noqa: S608
        html = client_for(alice).get(f"/audit/{row.pk}/").content.decode()
        assert "Broken" in html and "edited" in html

    def test_it_hides_another_teams_rows(self, alice: Any, mallory: Any, ci_bot: Any) -> None:
        row = decided(ci_bot.agent, alice, "make build", "allow")
        client = client_for(mallory)
        assert client.get(f"/audit/{row.pk}/").status_code == 404
        assert f"/audit/{row.pk}/" not in client.get("/audit/").content.decode()

    def test_it_pages_older_rows(self, alice: Any, ci_bot: Any) -> None:
        from approvals.views import AUDIT_PAGE_SIZE

        rows = [decided(ci_bot.agent, alice, f"echo {i}", "allow") for i in range(AUDIT_PAGE_SIZE + 1)]
        client = client_for(alice)
        first = client.get("/audit/").content.decode()
        assert f"/audit/{rows[0].pk}/" not in first and f"before={rows[1].pk}" in first
        second = client.get(f"/audit/?before={rows[1].pk}").content.decode()
        assert f"/audit/{rows[0].pk}/" in second
