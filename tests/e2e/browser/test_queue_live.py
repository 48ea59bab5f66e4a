"""The live queue in a real browser: pushes, deciding, and two people watching one request."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from tests.e2e.browser.conftest import EVENT_TIMEOUT_MS, ask, in_thread, wait_live

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class LiveQueueTests:
    def test_it_shows_a_request_submitted_after_the_page_loaded_without_a_reload(
        self, page_for: Any, alice: Any, ci_bot: Any
    ) -> None:
        page = page_for(alice)
        wait_live(page)
        assert page.title().startswith("Queue")
        req = ask(ci_bot.agent)
        page.wait_for_selector(f"#req-{req.pk}", timeout=EVENT_TIMEOUT_MS)
        assert page.locator(f"#req-{req.pk} .sh-cmd").first.inner_text() == "rm"
        page.wait_for_function("document.title.startsWith('(1) ')", timeout=EVENT_TIMEOUT_MS)

    def test_it_releases_the_waiting_agent_when_alice_clicks_allow(
        self, page_for: Any, server: Any, alice: Any, ci_bot: Any
    ) -> None:
        page = page_for(alice)
        wait_live(page)
        answers: list[httpx.Response] = []

        def agent_waits() -> None:
            call = {"tool_name": "Bash", "tool_input": {"command": "make deploy"}, "session_id": "s1", "cwd": "/tmp"}
            answers.append(
                httpx.post(
                    f"{server.url}/api/v1/permission-requests?wait=30",
                    json=call,
                    headers={"Authorization": f"Bearer {ci_bot.token}"},
                    timeout=40,
                )
            )

        waiter = threading.Thread(target=agent_waits)
        waiter.start()
        card = page.wait_for_selector(".card[data-state='pending']", timeout=10_000)
        assert card is not None
        card.query_selector("button[value='once']").click()
        waiter.join(timeout=20)
        assert answers and answers[0].status_code == 200, answers and answers[0].text
        decision = answers[0].json()["decision"]
        assert (decision["behavior"], decision["decided_by"], decision["surface"]) == ("allow", "alice", "web")
        page.wait_for_selector(".card[data-state='decided'] .decider:text-is('alice')", timeout=EVENT_TIMEOUT_MS)

    def test_it_shows_a_second_browser_who_decided(self, page_for: Any, alice: Any, bob: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        alice_page, bob_page = page_for(alice), page_for(bob)
        wait_live(alice_page)
        wait_live(bob_page)
        bob_page.wait_for_selector(f"#req-{req.pk}")
        alice_page.fill(f"#req-{req.pk} input[name='message']", "not on a Friday")
        alice_page.click(f"#req-{req.pk} button[value='deny']")
        bob_page.wait_for_selector(f"#req-{req.pk}[data-state='decided']", timeout=EVENT_TIMEOUT_MS)
        outcome = bob_page.inner_text(f"#req-{req.pk} .outcome")
        assert "decided by alice via web" in outcome and "Denied" in outcome
        assert "not on a Friday" in outcome

    def test_it_tells_others_that_alice_is_reviewing(self, page_for: Any, alice: Any, bob: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        alice_page, bob_page = page_for(alice), page_for(bob)
        wait_live(alice_page)
        wait_live(bob_page)
        alice_page.click(f"#req-{req.pk} input[name='message']")
        bob_page.wait_for_selector(f"#req-{req.pk} .reviewing:text-is('alice is reviewing')", timeout=EVENT_TIMEOUT_MS)

    def test_it_greys_out_a_card_the_deadline_expired(self, page_for: Any, alice: Any, ci_bot: Any) -> None:
        from approvals import services

        req = ask(ci_bot.agent)
        page = page_for(alice)
        wait_live(page)
        page.wait_for_selector(f"#req-{req.pk} .countdown:has-text('left')", timeout=EVENT_TIMEOUT_MS)
        in_thread(services.request_expire, request=req)
        page.wait_for_selector(f"#req-{req.pk}[data-state='expired']", timeout=EVENT_TIMEOUT_MS)
        assert "Timed out" in page.inner_text(f"#req-{req.pk} .outcome")
        assert page.locator(f"#req-{req.pk} button").count() == 0


class QuorumQueueTests:
    def test_two_browsers_vote_on_one_ask_that_needs_both(self, page_for: Any, alice: Any, ci_bot: Any) -> None:
        from approvals import services
        from tests.conftest import _person

        carol = _person("carol", ci_bot.agent.team, "approver")
        services.rule_create(
            rule="Bash(rm:*)", behavior="ask", source="localSettings", team=ci_bot.agent.team, approvals_required=2
        )
        alice_page, carol_page = page_for(alice), page_for(carol)
        wait_live(alice_page)
        wait_live(carol_page)
        req = ask(ci_bot.agent)
        card = f"#req-{req.pk}"
        carol_page.wait_for_selector(f"{card} .quorum:has-text('0 of 2 — no approvals yet')", timeout=EVENT_TIMEOUT_MS)

        alice_page.click(f"{card} button[value='once']")
        # Carol's card is pushed again with Alice's vote; it is still hers to decide.
        carol_page.wait_for_selector(f"{card} .quorum:has-text('1 of 2 — alice approved')", timeout=EVENT_TIMEOUT_MS)
        assert carol_page.get_attribute(card, "data-state") == "pending"

        carol_page.click(f"{card} button[value='once']")
        for page in (alice_page, carol_page):
            page.wait_for_selector(
                f"{card}[data-state='decided'] .decider:text-is('alice and carol')", timeout=EVENT_TIMEOUT_MS
            )
        from approvals import selectors

        rows = in_thread(lambda: list(selectors.audit_rows({}, alice).values_list("kind", flat=True)))
        assert rows[:3] == ["decision", "vote", "vote"]


class GatheredCardsTests:
    def test_calls_decided_as_they_were_sent_come_into_the_recent_list_newest_first_and_it_keeps_the_newest(
        self, page_for: Any, alice: Any, ci_bot: Any
    ) -> None:
        from django.db import transaction

        from approvals import selectors, services

        services.rule_create(rule="Bash(git log:*)", behavior="allow", source="projectSettings", team=ci_bot.agent.team)
        page = page_for(alice)
        wait_live(page)

        def decided_together() -> list[str]:
            # One transaction: their pushes ring together and reach the page as one batch.
            with transaction.atomic():
                calls = [
                    {"tool_name": "Bash", "tool_input": {"command": f"git log -{n}"}, "session_id": "s1", "cwd": "/tmp"}
                    for n in range(1, selectors.RECENT_FINISHED + 4)
                ]
                results = [services.request_submit(agent=ci_bot.agent, call=call) for call in calls]
            assert all(r.decision is not None and r.decision.behavior == "allow" for r in results)
            return [str(r.request.pk) for r in results]

        first = in_thread(decided_together)
        for request_id in first[-selectors.RECENT_FINISHED :]:
            page.wait_for_selector(f"#recent #req-{request_id}[data-state='decided']", timeout=EVENT_TIMEOUT_MS)
        shown = page.eval_on_selector_all("#recent .card", "cards => cards.map((c) => c.dataset.id)")
        assert shown == first[::-1][: selectors.RECENT_FINISHED]
        # The next ones push the oldest off: the list keeps the newest, as a reload shows it.
        second = in_thread(decided_together)
        for request_id in second[-selectors.RECENT_FINISHED :]:
            page.wait_for_selector(f"#recent #req-{request_id}[data-state='decided']", timeout=EVENT_TIMEOUT_MS)
        for request_id in first:
            page.wait_for_selector(f"#recent #req-{request_id}", state="detached", timeout=EVENT_TIMEOUT_MS)
        shown = page.eval_on_selector_all("#recent .card", "cards => cards.map((c) => c.dataset.id)")
        assert shown == second[::-1][: selectors.RECENT_FINISHED]
        page.reload()
        wait_live(page)
        reloaded = page.eval_on_selector_all("#recent .card", "cards => cards.map((c) => c.dataset.id)")
        assert reloaded == second[::-1][: selectors.RECENT_FINISHED]
        assert page.locator("#queue .card").count() == 0  # none of them was ever pending


class LostDoorbellTests:
    def test_a_tab_coming_back_fetches_the_list_afresh(self, page_for: Any, alice: Any, ci_bot: Any) -> None:
        """A decision whose push never arrived (a lost doorbell) leaves no stale card once the tab is back."""
        from approvals.models import PermissionRequest, RequestState

        req = ask(ci_bot.agent)
        page = page_for(alice)
        wait_live(page)
        page.wait_for_selector(f"#req-{req.pk}[data-state='pending']", timeout=EVENT_TIMEOUT_MS)
        # Ended without any announcement: what the page sees when the push is lost.
        in_thread(lambda: PermissionRequest.objects.filter(pk=req.pk).update(state=RequestState.CANCELLED))
        # The tab comes back into view (again each poll: the server refuses a second
        # snapshot within 2 s of the first, and the page just asks again next time).
        page.wait_for_function(
            """(id) => {
                if (!document.getElementById("req-" + id)) return true;
                document.dispatchEvent(new Event("visibilitychange"));
                return false;
            }""",
            arg=str(req.pk),
            polling=500,
            timeout=EVENT_TIMEOUT_MS,
        )
        assert page.locator(f"#req-{req.pk}").count() == 0
