"""The card says what changed since a person last allowed a call like this one."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import selectors, services
from approvals.models import Decision, PermissionRequest
from approvals.selectors import requests as request_reads
from tests.approvals.test_pages_card import card_html


def ask(agent: Any, command: str, cwd: str = "/tmp/proj", session: str = "s1") -> Any:
    call = {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": session, "cwd": cwd}
    result = services.request_submit(agent=agent, call=call)
    assert result.decision is None
    return result.request


def allowed(agent: Any, user: Any, command: str, **where: str) -> Any:
    req = ask(agent, command, **where)
    return services.request_decide(req.pk, services.Answer(behavior="allow", surface="web", user=user)).decision


def since(html: str) -> str:
    found = re.search(r'<div class="since-allowed">.*?</div>', html, re.S)
    return found.group() if found else ""


@pytest.mark.django_db
class SinceLastAllowedTests:
    def test_it_shows_the_command_diff_and_the_other_directory(self, alice: Any, ci_bot: Any) -> None:
        before = allowed(ci_bot.agent, alice, "pytest -q tests/a\necho done")
        shown = since(card_html(alice, ask(ci_bot.agent, "pytest -q tests/b\necho done", cwd="/tmp/other")))
        assert "alice allowed a call like this" in shown
        assert f'href="/audit/{before.pk}/"' in shown
        assert "<li>the command changed</li>" in shown
        words = re.sub(r'<span class="w">([^<]*)</span>', r"\1", shown)
        assert '<span class="d-del">-pytest -q tests/a</span><span class="d-add">+pytest -q tests/b</span>' in words
        assert "echo done" not in shown, "only changed lines"
        assert "<li>cwd was <code>/tmp/proj</code>, now <code>/tmp/other</code></li>" in shown

    def test_it_says_when_the_call_is_the_very_same(self, alice: Any, ci_bot: Any) -> None:
        allowed(ci_bot.agent, alice, "pytest -q")
        assert "this is the very same call" in since(card_html(alice, ask(ci_bot.agent, "pytest -q")))

    def test_it_names_the_newest_allow_and_another_session(self, alice: Any, admin: Any, ci_bot: Any) -> None:
        allowed(ci_bot.agent, alice, "pytest -q tests/old")
        allowed(ci_bot.agent, admin, "pytest -q tests/new", session="s0")
        shown = since(card_html(alice, ask(ci_bot.agent, "pytest -q tests/new")))
        assert "root allowed a call like this" in shown and "this is" not in shown
        assert "<li>session was <code>s0</code>, now <code>s1</code></li>" in shown

    @pytest.mark.parametrize("other", ["denied", "rule", "another agent", "another command"])
    def test_it_ignores_what_is_not_a_persons_allow_of_a_call_like_this(
        self, alice: Any, ci_bot: Any, other_bot: Any, default_team: Any, other: str
    ) -> None:
        if other == "denied":
            req = ask(ci_bot.agent, "pytest -q")
            services.request_decide(req.pk, services.Answer(behavior="deny", surface="web", user=alice))
        elif other == "rule":
            rule = services.rule_create(rule="Bash(pytest:*)", behavior="allow", source="session", team=default_team)
            call = {"tool_name": "Bash", "tool_input": {"command": "pytest -q"}, "session_id": "s1", "cwd": "/tmp/proj"}
            decision = services.request_submit(agent=ci_bot.agent, call=call).decision
            assert decision is not None and decision.behavior == "allow"
            services.rule_delete(rule=rule)
        elif other == "another agent":
            allowed(other_bot.agent, alice, "pytest -q")
        else:
            allowed(ci_bot.agent, alice, "npm test")
        assert since(card_html(alice, ask(ci_bot.agent, "pytest -q"))) == ""

    def test_it_escapes_what_the_agent_sent(self, alice: Any, ci_bot: Any) -> None:
        allowed(ci_bot.agent, alice, "echo <b>old</b>")
        shown = since(card_html(alice, ask(ci_bot.agent, "echo <script>x</script>")))
        assert "<script>" not in shown and "&lt;script&gt;" in shown


@pytest.mark.django_db
class LastAllowedReadTests:
    """`selectors.last_allowed_like` is two statements written once per process."""

    def test_it_reads_what_the_orm_reads_in_two_statements(
        self, alice: Any, admin: Any, ci_bot: Any, other_bot: Any
    ) -> None:
        allowed(ci_bot.agent, alice, "pytest -q tests/old")
        newest = allowed(ci_bot.agent, admin, "pytest -q tests/new", session="s0")
        allowed(ci_bot.agent, alice, "npm test")  # newer, not like it: skipped over
        allowed(other_bot.agent, alice, "pytest -q")  # another agent's
        pending = ask(ci_bot.agent, "pytest -x")
        with CaptureQueriesContext(connection) as queries:
            found = selectors.last_allowed_like(pending)
            assert found is not None
            request = found.request  # read with it: no statement of its own
        assert len(queries) == 2, [q["sql"][:80] for q in queries]
        orm = Decision.objects.select_related("request").get(pk=newest.pk)
        assert found == orm
        assert all(getattr(found, f.attname) == getattr(orm, f.attname) for f in Decision._meta.concrete_fields)
        fields = PermissionRequest._meta.concrete_fields
        assert all(getattr(request, f.attname) == getattr(orm.request, f.attname) for f in fields)
        # The request's own allow is never its own "last allow".
        assert selectors.last_allowed_like(newest.request) != newest

    @pytest.mark.postgresql
    def test_it_walks_only_peoples_allows_on_postgresql(self, alice: Any, ci_bot: Any) -> None:
        allowed(ci_bot.agent, alice, "pytest -q")
        pending = ask(ci_bot.agent, "pytest -x")
        assert connection.vendor == "postgresql", "run with DATABASE_URL=postgres://… (marker: postgresql)"
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE approvals_decision")
            cursor.execute("SET enable_seqscan = off")
            try:
                sql = request_reads._allows_sql(connection.vendor)
                params = [pending.agent_id, "Bash", pending.pk, request_reads.LIKE_LOOKBACK]
                cursor.execute(f"EXPLAIN {sql}", params)
                plan = "\n".join(row[0] for row in cursor.fetchall())
            finally:
                cursor.execute("RESET enable_seqscan")
        assert "decision_people_allows" in plan, plan
