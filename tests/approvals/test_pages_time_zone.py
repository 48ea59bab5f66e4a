"""Times on pages in the viewer's zone (the cookie static/time.js sets), never UTC microseconds."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from approvals import services
from approvals.middleware import TIME_ZONE_COOKIE, viewer_time_zone


def client_for(user: Any, zone: str = "") -> Client:
    client = Client()
    client.force_login(user)
    if zone:
        client.cookies[TIME_ZONE_COOKIE] = zone
    return client


def decided(agent: Any, user: Any) -> Any:
    call = {"tool_name": "Bash", "tool_input": {"command": "make deploy"}, "session_id": "s1", "cwd": "/tmp/proj"}
    request = services.request_submit(agent=agent, call=call).request
    return services.request_decide(request.pk, services.Answer(behavior="deny", surface="web", user=user)).decision


@pytest.mark.django_db
class ViewerTimeZoneTests:
    def test_it_writes_times_in_the_zone_the_cookie_names(self, alice: Any, ci_bot: Any) -> None:
        row = decided(ci_bot.agent, alice)
        html = client_for(alice, "Asia/Kolkata").get(f"/audit/{row.pk}/").content.decode()
        stamps = re.findall(r'<time class="local" datetime="([^"]+)" data-style="seconds">([^<]+)</time>', html)
        assert stamps, "the audit row names when it was asked and decided"
        for stamp, text in stamps:
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp), stamp
            assert text.endswith(" IST"), text

    @pytest.mark.parametrize("cookie", ["", "Not/AZone", "../../etc/passwd", "/etc/localtime", "A" * 80, "UTC\x00"])
    def test_it_falls_back_to_utc_for_a_cookie_that_names_no_zone(self, alice: Any, ci_bot: Any, cookie: str) -> None:
        assert cookie == "" or viewer_time_zone(cookie) is None
        row = decided(ci_bot.agent, alice)
        response = client_for(alice, cookie).get(f"/audit/{row.pk}/")
        assert response.status_code == 200
        assert " UTC</time>" in response.content.decode()

    def test_no_page_shows_microseconds(self, alice: Any, ci_bot: Any) -> None:
        row = decided(ci_bot.agent, alice)
        client = client_for(alice, "Europe/Paris")
        for path in ("/", f"/requests/{row.request_id}/", "/audit/", f"/audit/{row.pk}/", "/denials/", "/rules/"):
            html = client.get(path).content.decode()
            shown = re.sub(r'"[^"]*"', '""', html)  # text, not attribute values
            assert not re.search(r"\d\d:\d\d:\d\d\.\d{3,6}", shown), path
            assert not re.search(r"since=[^&\"]*\.\d{6}", html), path

    def test_the_audit_filter_shows_a_linked_moment_in_the_viewers_zone(self, alice: Any) -> None:
        html = client_for(alice, "Asia/Kolkata").get("/audit/?since=2026-12-01T09:30:00%2B00:00").content.decode()
        assert 'name="since" value="2026-12-01T15:00:00"' in html
