"""Agent-supplied text stays text; viewers cannot decide, not even with a forged POST."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.browser.conftest import EVENT_TIMEOUT_MS, ask, wait_live

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAYLOAD = "echo '<script>window.pwned=1</script>' <img src=x onerror=\"window.pwned=2\">"


class SafetyTests:
    def test_it_keeps_an_xss_payload_in_a_command_as_text(self, page_for: Any, alice: Any, ci_bot: Any) -> None:
        page = page_for(alice)
        wait_live(page)
        pushed = ask(ci_bot.agent, PAYLOAD, session_id="<b>sess</b>")
        page.wait_for_selector(f"#req-{pushed.pk}", timeout=EVENT_TIMEOUT_MS)
        page.reload()  # the server-rendered page as well as the pushed fragment
        wait_live(page)
        text = page.inner_text(f"#req-{pushed.pk} .input")
        assert "<script>window.pwned=1</script>" in text
        assert page.evaluate("window.pwned === undefined")
        assert page.locator(f"#req-{pushed.pk} img").count() == 0
        assert page.locator(f"#req-{pushed.pk} script").count() == 0

    def test_it_shows_bob_no_buttons_and_refuses_his_forged_post(self, page_for: Any, bob: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        page = page_for(bob)
        wait_live(page)
        page.wait_for_selector(f"#req-{req.pk}")
        assert page.locator(f"#req-{req.pk} form.decide").count() == 0
        assert page.locator(f"#req-{req.pk} button").count() == 0
        status = page.evaluate(
            """async (id) => {
                const csrf = document.querySelector('meta[name="csrf-token"]').content;
                const body = new URLSearchParams({action: "once", csrfmiddlewaretoken: csrf});
                const r = await fetch(`/requests/${id}/decide`, {method: "POST", body, headers: {"X-CSRFToken": csrf}});
                return r.status;
            }""",
            str(req.pk),
        )
        assert status == 403
        req.refresh_from_db()
        assert req.state == "pending"
