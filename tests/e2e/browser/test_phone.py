"""A 375 px phone: every page fits without horizontal scrolling, and the queue is usable."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.browser.conftest import ask, in_thread, wait_live

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 375, "height": 812}


class PhoneLayoutTests:
    def test_it_has_no_horizontal_scroll_at_375_px(self, page_for: Any, alice: Any, ci_bot: Any) -> None:
        from approvals import services

        long = "find / -name '*.py' -exec grep -l " + "averyveryverylongargumentwithoutanyspaces" * 4 + " {} +"
        req = ask(ci_bot.agent, long)
        other = ask(ci_bot.agent)
        in_thread(services.request_decide, other.pk, services.Answer(behavior="deny", surface="web", user=alice))
        page = page_for(alice, **PHONE)
        wait_live(page)
        page.wait_for_selector(f"#req-{req.pk}")
        for path in (
            "/",
            "/audit/",
            "/denials/",
            "/rules/",
            "/agents/",
            "/profile/",
            "/notifications/",
            f"/requests/{req.pk}/",
        ):
            page.goto(page.url.split("/", 3)[0] + "//" + page.url.split("/", 3)[2] + path)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 375, f"{path} is {width}px wide at 375px"

    def test_it_lets_a_thumb_reach_allow_on_a_phone(self, page_for: Any, alice: Any, ci_bot: Any) -> None:
        req = ask(ci_bot.agent)
        page = page_for(alice, **PHONE)
        wait_live(page)
        page.wait_for_selector(f"#req-{req.pk} button[value='once']", state="visible")
        button = page.locator(f"#req-{req.pk} button[value='once']")
        box = button.bounding_box()
        assert box is not None and box["height"] >= 44 and box["width"] >= 120
        button.click()
        page.wait_for_selector(f"#req-{req.pk}[data-state='decided']", timeout=5_000)
