"""The queue's batch bar: identical pending calls, decided in one press, each its own decision."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.browser.conftest import EVENT_TIMEOUT_MS, ask, wait_live

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class BatchBarTests:
    def test_it_counts_identical_calls_live_and_allows_exactly_those_shown(
        self, page_for: Any, alice: Any, ci_bot: Any
    ) -> None:
        from approvals.models import Decision

        first, second = ask(ci_bot.agent, "pytest -q"), ask(ci_bot.agent, "pytest -q")
        other = ask(ci_bot.agent, "pytest -x")
        page = page_for(alice)
        wait_live(page)
        bar = page.locator(".batch")
        assert bar.count() == 1
        assert bar.locator(".batch-text").inner_text() == "2 identical calls: Bash pytest -q from ci-bot, session s1"
        third = ask(ci_bot.agent, "pytest -q")
        page.wait_for_selector(".batch button[value='once']:text('Allow all 3')", timeout=EVENT_TIMEOUT_MS)
        assert bar.locator("button[value='once']").get_attribute("aria-label") == (
            "Allow all 3: Bash pytest -q from ci-bot, session s1"
        )
        bar.locator("button[value='once']").click()
        page.wait_for_selector("#queue-status:text('Allowed 3 of 3 identical calls.')", timeout=EVENT_TIMEOUT_MS)
        for req in (first, second, third):
            page.wait_for_selector(f"#req-{req.pk}[data-state='decided'] .outcome-allow", timeout=EVENT_TIMEOUT_MS)
        assert page.locator(".batch").count() == 0, "no bar is left once its calls are decided"
        assert page.locator(f"#req-{other.pk}[data-state='pending']").count() == 1
        assert Decision.objects.filter(request__in=[first, second, third], decided_by="alice").count() == 3
