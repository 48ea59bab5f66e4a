"""Logging in through the form, and logging out closing the dashboard's socket everywhere."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.browser.conftest import wait_live

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class LoginTests:
    def test_it_logs_in_with_the_form_and_goes_live(self, browser: Any, server: Any, alice: Any) -> None:
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(server.url + "/")
            assert "/accounts/login/" in page.url
            page.fill("#id_username", "alice")
            page.fill("#id_password", "alice-password-1")
            page.click("button[type=submit]")
            wait_live(page)
            assert page.inner_text(".who").startswith("alice")
        finally:
            context.close()

    def test_it_closes_other_tabs_sockets_on_logout(self, page_for: Any, alice: Any) -> None:
        first = page_for(alice)
        wait_live(first)
        second = first.context.new_page()
        second.goto(first.url)
        wait_live(second)
        first.click("#logout-form button")
        first.wait_for_url("**/accounts/login/", timeout=5_000)
        # The other tab's socket is closed by the server and the page goes to the login form.
        second.wait_for_url("**/accounts/login/", timeout=5_000)
