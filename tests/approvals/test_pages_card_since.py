"""The card says what changed since a person last allowed a call like this one."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals import changes, selectors, services
from approvals.models import Decision, PermissionRequest, Team
from approvals.selectors import requests as request_reads
from approvals.written import run_together
from relay import fanout
from relay import selectors as relay_selectors
from tests.approvals.test_pages_card import card_html
from tests.round_trips import round_trips


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


# The oracle: the read before the likeness was stored (the newest people's allows of the
# agent and tool, the first whose likeness Python works out to the pending call's).
def allowed_like_by_python(request: Any) -> Decision | None:
    recent = (
        Decision.objects.filter(agent_id=request.agent_id, tool_name=request.tool_name, behavior="allow")
        .filter(reason_type="user")
        .exclude(request_id=request.pk)
        .select_related("request")
        .order_by("-created_at")[: request_reads.LIKE_LOOKBACK]
    )
    key = changes.likeness_key(request.tool_name, request.tool_input)
    return next((d for d in recent if changes.likeness_key(d.request.tool_name, d.request.tool_input) == key), None)


# Calls that are alike and not: a command's first word, a file's path, a URL's host.
CALLS = [
    ("Bash", {"command": "pytest -q"}),
    ("Bash", {"command": "pytest -x tests/b"}),
    ("Bash", {"command": "npm test"}),
    ("Bash", {"command": "  pytest"}),
    ("Bash", {"command": "pytest\t-k x"}),
    ("Edit", {"file_path": "/srv/app/a.py", "old_string": "a", "new_string": "b"}),
    ("Edit", {"file_path": "/srv/app/a.py", "old_string": "c", "new_string": "d"}),
    ("Edit", {"file_path": "/srv/app/b.py", "old_string": "a", "new_string": "b"}),
    ("WebFetch", {"url": "https://example.com/a", "prompt": "p"}),
    ("WebFetch", {"url": "https://EXAMPLE.com/b", "prompt": "p"}),
    ("WebFetch", {"url": "https://example.org/a", "prompt": "p"}),
]


@pytest.mark.django_db
class LastAllowedReadTests:
    """`selectors.last_allowed_like` is one statement, written once per process."""

    def test_it_reads_what_the_orm_reads_in_one_statement(
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
        assert len(queries) == 1, [q["sql"][:80] for q in queries]
        orm = Decision.objects.select_related("request").get(pk=newest.pk)
        assert found == orm
        assert all(getattr(found, f.attname) == getattr(orm, f.attname) for f in Decision._meta.concrete_fields)
        fields = PermissionRequest._meta.concrete_fields
        assert all(getattr(request, f.attname) == getattr(orm.request, f.attname) for f in fields)
        # The request's own allow is never its own "last allow".
        assert selectors.last_allowed_like(newest.request) != newest

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        history=st.lists(
            st.tuples(
                st.sampled_from(range(len(CALLS))),
                st.sampled_from(["allow", "allow", "deny"]),
                st.sampled_from(["mine", "mine", "other agent's"]),
            ),
            max_size=12,
        ),
        asked=st.sampled_from(range(len(CALLS))),
    )
    def test_it_finds_what_working_the_likeness_out_in_python_found(
        self, history: list[tuple[int, str, str]], asked: int
    ) -> None:
        # One fresh team per example: the audit log is append-only, so examples cannot be undone.
        team = Team.objects.create(name=f"like-{uuid.uuid4().hex[:12]}")
        mine, _ = services.agent_create(name="like-bot", team=team)
        other, _ = services.agent_create(name="other-like-bot", team=team)
        services.rule_create(rule="Edit", behavior="ask", source="policySettings", team=team)
        for n, (call, behavior, whose) in enumerate([*history, (asked, "", "mine")]):
            tool_name, tool_input = CALLS[call]
            agent = mine if whose == "mine" else other
            submitted = {"tool_name": tool_name, "tool_input": tool_input, "cwd": "/srv/app", "tool_use_id": f"l{n}"}
            result = services.request_submit(agent=agent, call=submitted)
            assert result.decision is None, "every call here is asked"
            if behavior:
                services.request_decide(
                    result.request.pk, services.Answer(behavior=behavior, surface="api", decided_by="al")
                )
        pending = result.request
        found, expected = selectors.last_allowed_like(pending), allowed_like_by_python(pending)
        assert (found and found.pk) == (expected and expected.pk), (history, asked)

    def test_a_stored_likeness_that_lies_finds_nothing(self, alice: Any, ci_bot: Any) -> None:
        # The likeness is worked out from what the chain covers, but is not covered itself:
        # rewritten, it can find an allow, never make the card call it "like this".
        other = allowed(ci_bot.agent, alice, "npm test")
        pending = ask(ci_bot.agent, "pytest -x")
        PermissionRequest.objects.filter(pk=other.request_id).update(likeness=pending.likeness)
        assert request_reads.allowed_like(run_together([request_reads.allowed_like_statement(pending.pk)])[0]) == other
        assert selectors.last_allowed_like(pending) is None
        assert since(card_html(alice, pending)) == ""

    def test_it_looks_back_so_far_and_no_further(self, alice: Any, ci_bot: Any) -> None:
        alike = allowed(ci_bot.agent, alice, "pytest -q")
        for n in range(request_reads.LIKE_LOOKBACK - 1):
            allowed(ci_bot.agent, alice, f"npm test {n}")
        pending = ask(ci_bot.agent, "pytest -x")
        assert selectors.last_allowed_like(pending) == alike  # the last of the newest 50
        allowed(ci_bot.agent, alice, "npm test again")
        assert selectors.last_allowed_like(pending) is None == allowed_like_by_python(pending)

    @pytest.mark.postgresql
    def test_it_walks_only_peoples_allows_on_postgresql(self, alice: Any, ci_bot: Any) -> None:
        allowed(ci_bot.agent, alice, "pytest -q")
        pending = ask(ci_bot.agent, "pytest -x")
        assert connection.vendor == "postgresql", "run with DATABASE_URL=postgres://… (marker: postgresql)"
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE approvals_decision")
            cursor.execute("SET enable_seqscan = off")
            try:
                sql, params = request_reads.allowed_like_statement(pending.pk)
                cursor.execute(f"EXPLAIN {sql}", params)
                plan = "\n".join(row[0] for row in cursor.fetchall())
            finally:
                cursor.execute("RESET enable_seqscan")
        assert "decision_people_allows" in plan, plan
        # The walk is in the index's order, stopping at the newest 50: nothing is sorted.
        assert "Sort" not in plan, plan


@pytest.mark.django_db
class ReadWithTheCardTests:
    """A pending card's "since last allowed" comes in the message that reads the card."""

    def test_an_asked_card_reads_it_with_the_request_and_renders_the_same(
        self, alice: Any, admin: Any, ci_bot: Any, other_bot: Any
    ) -> None:
        allowed(ci_bot.agent, alice, "pytest -q tests/a")
        asks = [ask(ci_bot.agent, "pytest -x"), ask(ci_bot.agent, "npm test"), ask(other_bot.agent, "pytest -x")]
        decided = allowed(ci_bot.agent, admin, "pytest --lf")
        ids = [r.pk for r in asks] + [decided.request_id]
        with round_trips() as trips:
            read, _ = relay_selectors.requests_for_cards(ids, asked=ids)
            answers = {request_id: selectors.last_allowed_like(read[request_id]) for request_id in ids}
        # The requests, their teams' members and one read per ask: one round trip on PostgreSQL.
        assert [len(trip) for trip in trips] == (
            [2 + len(ids)] if connection.vendor == "postgresql" else [1] * (2 + len(ids))
        ), trips
        for request_id in ids:
            assert answers[request_id] == allowed_like_by_python(read[request_id])
        assert answers[asks[0].pk] is not None and answers[asks[1].pk] is None is answers[asks[2].pk]
        # A request no longer pending: its card says nothing "since" (its read is not used).
        assert answers[decided.request_id] is not None
        decided_card = fanout.load_cards([decided.request_id], asked=[decided.request_id])[decided.request_id]
        assert decided_card is not None and "since-allowed" not in decided_card.html_approver
        # The card pushed is the card the page renders, which reads it on its own.
        card = fanout.load_cards([asks[0].pk], asked=[asks[0].pk])[asks[0].pk]
        assert card is not None and "root allowed a call like this" in card.html_approver
        assert since(card.html_approver) == since(card_html(alice, asks[0]))

    def test_a_card_not_announced_as_an_ask_reads_it_on_its_own(self, alice: Any, ci_bot: Any) -> None:
        allowed(ci_bot.agent, alice, "pytest -q")
        pending = ask(ci_bot.agent, "pytest -x")
        read, _ = relay_selectors.requests_for_cards([pending.pk])
        with CaptureQueriesContext(connection) as queries:
            found = selectors.last_allowed_like(read[pending.pk])
        assert len(queries) == 1 and found is not None

    def test_the_queue_reads_it_for_every_pending_card_together(self, alice: Any, admin: Any, ci_bot: Any) -> None:
        allowed(ci_bot.agent, alice, "pytest -q tests/a")
        allowed(ci_bot.agent, admin, "npm test")
        asks = [ask(ci_bot.agent, "pytest -x"), ask(ci_bot.agent, "npm run lint"), ask(ci_bot.agent, "make docs")]
        with round_trips() as trips:
            cards = selectors.pending_cards(alice)
            answers = [selectors.last_allowed_like(request) for request in cards]
        # The pending requests (after the user's teams), then every card's "since": one
        # round trip on PostgreSQL.
        since_trips = [trip for trip in trips if any("gh_recent" in sql for sql in trip)]
        assert all("gh_recent" in sql for trip in since_trips for sql in trip), since_trips
        assert [len(trip) for trip in since_trips] == (
            [len(asks)] if connection.vendor == "postgresql" else [1] * len(asks)
        ), since_trips
        assert len(trips) == 2 + len(since_trips), [trip[0][:70] for trip in trips]
        assert [request.pk for request in cards] == [request.pk for request in asks]
        assert answers == [allowed_like_by_python(request) for request in asks]
        assert [a and a.decided_by for a in answers] == ["alice", "root", None]
        # The page and the dashboard's snapshot show what the card page shows.
        client = Client()
        client.force_login(alice)
        queue = client.get("/").content.decode()
        for request in asks:
            card = re.search(rf'<article class="card[^"]*" id="req-{request.pk}".*?</article>', queue, re.S)
            assert card is not None and since(card.group()) == since(card_html(alice, request))
        assert queue.count('<div class="since-allowed">') == 2
