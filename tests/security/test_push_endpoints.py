"""A push subscription's endpoint is a URL a person hands the server: only push services pass.

The server POSTs to every endpoint it keeps, so the allow-list (`GATEHOUSE_PUSH_SERVICES`)
is an SSRF guard. A table of hostile spellings — userinfo, backslashes, look-alike
hosts, encoded characters, IP forms of loopback and metadata addresses, plain http,
other ports — and a generated corpus of prefixes and suffixes around the real hosts.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay.push.endpoints import DEFAULT_PUSH_SERVICES, EndpointRefused, check_endpoint

SERVICES = list(DEFAULT_PUSH_SERVICES)
WITH_FAKE = [*SERVICES, "127.0.0.1"]

GOOD = [
    "https://fcm.googleapis.com/fcm/send/cXyZ:APA91bH",
    "https://FCM.googleapis.com/wp/abc",
    "https://fcm.googleapis.com:443/wp/abc",
    "https://updates.push.services.mozilla.com/wpush/v2/gAAAAAB",
    "https://web.push.apple.com/QGz8n3s",
    "https://wns2-par02p.notify.windows.com/w/?token=BQYAAAB",
]

HOSTILE = [
    "http://fcm.googleapis.com/wp/abc",  # plain http to a real service
    "https://fcm.googleapis.com:8443/wp/abc",  # another port
    "https://fcm.googleapis.com@evil.example/wp",  # userinfo: the host is evil.example
    "https://evil.example@fcm.googleapis.com/wp",  # userinfo on the right host
    "https://user:pw@fcm.googleapis.com/wp",
    "https://evil.example\\@fcm.googleapis.com/wp",  # WHATWG: backslash is a slash
    "https://evil.example\\.fcm.googleapis.com/",
    "https://fcm.googleapis.com.evil.example/wp",  # suffix look-alike
    "https://fcmxgoogleapis.com/wp",
    "https://evil.example/fcm.googleapis.com",
    "https://evil.example/?fcm.googleapis.com",
    "https://evil.example#@fcm.googleapis.com",
    "https://fcm.googleapis.com./wp",  # trailing dot
    "https://fcm%2egoogleapis.com/wp",  # encoded dot
    "https://fcm.googleapis.com%2f@evil.example/",
    "https://fcm.googleapis.com%00.evil.example/",
    "https://fcm.googleapis.com\t/wp",
    " https://fcm.googleapis.com/wp",
    "https://fcm.googleapis.com/wp\n",
    "https://notify.windows.com/w",  # the wildcard needs a subdomain
    "https://evilnotify.windows.com/w",
    "https://notify.windows.com.evil.example/w",
    "https://127.0.0.1/push",  # loopback not listed
    "http://127.0.0.1:6379/",
    "http://localhost:8000/api/v1/rules",
    "http://[::1]/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0177.0.0.1/",
    "http://127.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/",
    "http://10.0.0.5/",
    "http://[::ffff:127.0.0.1]/",
    "file:///etc/passwd",
    "gopher://fcm.googleapis.com/",
    "ftp://fcm.googleapis.com/",
    "javascript:alert(1)",
    "//fcm.googleapis.com/wp",
    "fcm.googleapis.com/wp",
    "",
    "https://" + "a" * 3000 + ".fcm.googleapis.com/",
]

# With the fake listed (as the tests run it): still only that exact loopback host.
HOSTILE_WITH_FAKE = [
    "http://localhost:8000/",
    "http://127.0.0.2/",
    "http://2130706433/",  # 127.0.0.1 in another spelling is parsed to it: allowed only as listed
    "http://[::1]:8000/",
    "http://127.0.0.1@evil.example/",
    "http://evil.example\\@127.0.0.1/",
    "https://127.0.0.1.evil.example/",
]


class EndpointTableTests:
    @pytest.mark.parametrize("endpoint", GOOD)
    def test_it_accepts_the_browsers_push_services(self, endpoint: str) -> None:
        assert check_endpoint(endpoint, SERVICES).startswith("https://")

    @pytest.mark.parametrize("endpoint", HOSTILE)
    def test_it_refuses_every_hostile_endpoint(self, endpoint: str) -> None:
        with pytest.raises(EndpointRefused):
            check_endpoint(endpoint, SERVICES)

    def test_full_width_letters_fold_to_the_host_a_browser_would_reach(self) -> None:
        # IDNA folds them, as the browser that wrote the endpoint did, and the URL is sent
        # in its folded form: to the real push service, never to a look-alike.
        endpoint = "https://\uff46\uff43\uff4d.googleapis.com/wp"
        assert check_endpoint(endpoint, SERVICES) == "https://fcm.googleapis.com/wp"

    def test_plain_http_only_for_a_listed_loopback_host(self) -> None:
        assert check_endpoint("http://127.0.0.1:8123/push/x", WITH_FAKE) == "http://127.0.0.1:8123/push/x"

    @pytest.mark.parametrize("endpoint", HOSTILE_WITH_FAKE)
    def test_a_listed_loopback_host_opens_nothing_else(self, endpoint: str) -> None:
        if endpoint == "http://2130706433/":
            assert check_endpoint(endpoint, WITH_FAKE) == "http://127.0.0.1/"
            return
        with pytest.raises(EndpointRefused):
            check_endpoint(endpoint, WITH_FAKE)

    def test_it_is_checked_at_subscribe_time_through_the_api(self, alice: Any) -> None:
        from rest_framework.test import APIClient

        client = APIClient()
        client.force_login(alice)
        keys = {"p256dh": "BAAA", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}
        for endpoint in ("http://169.254.169.254/latest/meta-data/", "https://fcm.googleapis.com@evil.example/"):
            response = client.post("/api/v1/push-subscriptions", {"endpoint": endpoint, "keys": keys}, format="json")
            assert response.status_code == 400
            assert "endpoint" in response.json()["error"]["message"]


host_part = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.@:\\/%#?", min_size=1, max_size=12)


class EndpointCorpusTests:
    @settings(max_examples=500, deadline=None)
    @given(service=st.sampled_from(SERVICES[:3]), before=host_part, after=host_part)
    def test_nothing_around_a_real_host_reaches_another_host(self, service: str, before: str, after: str) -> None:
        endpoint = f"https://{before}{service}{after}/wp"
        try:
            normalised = check_endpoint(endpoint, SERVICES)
        except EndpointRefused:
            return
        from urllib3.util import parse_url

        host = parse_url(normalised).host or ""
        assert host == service or (host.endswith(".notify.windows.com")), (endpoint, normalised)
