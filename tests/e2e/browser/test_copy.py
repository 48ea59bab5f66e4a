"""A one-time token is copied with one tap: the Copy button beside it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.browser.conftest import EVENT_TIMEOUT_MS, session_cookie
from tests.e2e.browser.test_accessibility import axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class CopyButtonTests:
    @pytest.mark.parametrize(
        ("path", "press"), [("/profile/", "Create a token"), ("/agents/", "Register")], ids=["api-token", "agent"]
    )
    def test_it_copies_the_token_shown_once(self, browser: Any, server: Any, alice: Any, path: str, press: str) -> None:
        context = browser.new_context(
            permissions=["clipboard-read", "clipboard-write"], viewport={"width": 375, "height": 812}
        )
        try:
            context.add_cookies([{"name": "sessionid", "value": session_cookie(alice), "url": server.url}])
            page = context.new_page()
            page.goto(server.url + path)
            if path == "/agents/":
                page.fill("input[name='name']", "laptop")
            page.get_by_role("button", name=press).click()
            token = page.locator("#token-value").inner_text()
            assert token.startswith("gh")
            button = page.locator("button[data-copy='token-value']")
            # Hidden until copy.js runs (no page offers a dead button): wait for the script.
            button.wait_for(state="visible", timeout=EVENT_TIMEOUT_MS)
            box = button.bounding_box()
            assert box is not None and box["height"] >= 44 and box["width"] >= 44
            button.click()
            page.wait_for_selector("#token-value-copied:text('Copied.')", timeout=EVENT_TIMEOUT_MS)
            assert page.evaluate("navigator.clipboard.readText()") == token
            assert axe_violations(page) == [], "the page with its token shown passes axe-core"
        finally:
            context.close()
