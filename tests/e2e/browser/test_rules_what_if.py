"""The rules page shows what a draft rule would change before it is saved (real Chromium)."""

from __future__ import annotations

from typing import Any

import pytest

from approvals import services
from approvals.models import Rule
from tests.e2e.browser.conftest import ask, in_thread

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAYLOAD = "npm run test -- '<img src=x onerror=\"window.pwned=1\">'"


class RulesWhatIfTests:
    def test_it_shows_a_drafts_what_if_before_saving(self, page_for: Any, alice: Any, ci_bot: Any) -> None:
        asked = ask(ci_bot.agent, PAYLOAD)
        in_thread(
            services.request_decide, asked.pk, services.Answer(behavior="deny", surface="api", decided_by="alice")
        )
        page = page_for(alice, "/rules/")
        page.fill("#add input[name=rule]", "Bash(npm run test:*)")
        page.select_option("#add select[name=behavior]", "allow")
        page.click("#add button[data-what-if]")
        result = page.wait_for_selector("#what-if-draft .what-if", timeout=10_000)
        text = result.inner_text()
        assert "ask->allow 1" in text
        assert "Flagged" in text
        assert "<img src=x" in text  # the agent's text shown as text
        assert page.evaluate("window.pwned === undefined")
        assert page.locator("#what-if-draft img").count() == 0
        assert in_thread(lambda: Rule.objects.count()) == 0
