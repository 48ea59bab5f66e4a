"""Times in the browser's own zone: on server-rendered pages and on cards pushed in UTC."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.browser.conftest import ask, in_thread, session_cookie, wait_live

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class BrowserTimeZoneTests:
    def test_it_shows_every_time_in_the_browsers_zone(self, browser: Any, server: Any, alice: Any, ci_bot: Any) -> None:
        from approvals import services

        done = ask(ci_bot.agent, "make deploy")
        row = in_thread(services.request_decide, done.pk, services.Answer(behavior="deny", surface="web", user=alice))
        context = browser.new_context(timezone_id="Asia/Tokyo", locale="en-GB")
        try:
            context.add_cookies([{"name": "sessionid", "value": session_cookie(alice), "url": server.url}])
            page = context.new_page()
            page.goto(f"{server.url}/audit/{row.decision.pk}/")
            assert {c["name"]: c["value"] for c in context.cookies()}["gh_tz"] == "Asia/Tokyo"
            shown = page.locator("time.local").all_inner_texts()
            assert shown and all("JST" in text or "GMT+9" in text for text in shown), shown
            page.goto(server.url + "/")
            wait_live(page)
            pushed = ask(ci_bot.agent, "npm publish")  # rendered by the relay, in UTC
            age = page.locator(f"#req-{pushed.pk} time.age")
            age.wait_for()
            title = age.get_attribute("title") or ""
            assert "JST" in title or "GMT+9" in title, title
            countdown = page.locator(f"#req-{pushed.pk} .countdown").get_attribute("title") or ""
            assert countdown.startswith("Denied automatically at ") and ("JST" in countdown or "GMT+9" in countdown)
        finally:
            context.close()
