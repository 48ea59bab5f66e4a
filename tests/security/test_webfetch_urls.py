"""WebFetch URLs are read as the fetcher (undici, WHATWG) reads them.

Numeric IPv4 forms, IPv6 with an embedded IPv4, ideographic and full-width dots and
backslashes must not escape the private-address check or the domain rules; and no
WebFetch allow rule (not even the whole tool) or mode answers the private-address
check: it asks.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy import decide

MODES = ("default", "acceptEdits", "bypassPermissions", "dontAsk", "auto")
ALLOW_ALL = [
    {
        "source": "projectSettings",
        "permissions": {"allow": ["WebFetch", "WebFetch(domain:127.0.0.1)", "WebFetch(domain:localhost)"]},
    }
]
DOMAIN_RULES = [
    {
        "source": "projectSettings",
        "permissions": {"allow": ["WebFetch(domain:docs.python.org)"], "deny": ["WebFetch(domain:*.evil.com)"]},
    }
]


def fetch(url: str, mode: str = "default", rules: list[dict[str, Any]] = ALLOW_ALL) -> str:
    doc = {
        "tool_name": "WebFetch",
        "tool_input": {"url": url, "prompt": "summarise"},
        "cwd": "/srv/project",
        "home": "/home/alice",
        "mode": mode,
        "rules": rules,
        "classifier_verdict": {"name": "permissive", "behavior": "allow"},
    }
    return decide(doc).behavior


def ipv4_spellings(address: str) -> list[str]:
    """Ways a WHATWG parser reads as ``address``."""
    a, b, c, d = (int(p) for p in address.split("."))
    number = int(ipaddress.IPv4Address(address))
    return [
        address,
        str(number),
        hex(number),
        "0x" + format(number, "X"),
        ".".join("0" + format(p, "o") if p else "0" for p in (a, b, c, d)),
        ".".join(hex(p) for p in (a, b, c, d)),
        f"{a}.{b}.{(c << 8) | d}",
        f"{a}.{(b << 16) | (c << 8) | d}",
        f"{address}.",
        address.replace(".", "\u3002"),
        address.replace(".", "\uff0e"),
        address.replace(".", "\uff61"),
        f"[::ffff:{address}]",
        f"[::ffff:{format((a << 8) | b, 'x')}:{format((c << 8) | d, 'x')}]",
        f"[64:ff9b::{address}]",
    ]


PRIVATE = ["127.0.0.1", "10.1.2.3", "192.168.1.1", "172.16.0.9", "169.254.169.254", "0.0.0.0", "100.64.0.1"]
URL_SHAPES = [
    "http://{h}/",
    "https://{h}:8443/x",
    "http://user:pw@{h}/",
    "http:\\\\{h}\\x",
    "HTTP://{h}",
    "http://{h}#x",
]


class WebFetchRegressionTests:
    @pytest.mark.parametrize(
        "url",
        [
            "http://0x7f000001/",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://[::ffff:127.0.0.1]/",
        ],
    )
    @pytest.mark.parametrize("mode", MODES)
    def test_it_never_allows_numeric_loopback_forms(self, url: str, mode: str) -> None:
        assert fetch(url, mode) in ("ask", "deny")

    def test_an_allow_rule_does_not_override_the_private_address_check(self) -> None:
        assert fetch("http://127.0.0.1:8000/admin") == "ask"
        assert fetch("http://localhost/") == "ask"
        assert fetch("http://[::1]/", "bypassPermissions") == "ask"

    def test_it_reads_backslashes_and_wide_dots_as_the_fetcher_does(self) -> None:
        # urlsplit saw docs.python.org here; the fetcher goes to evil.com.
        assert fetch("https://evil.com\\@docs.python.org/", rules=DOMAIN_RULES) == "ask"
        assert fetch("https://docs\u3002python\uff0eorg/3/", rules=DOMAIN_RULES) == "allow"
        assert fetch("https://x.evil\uff0ecom/", rules=DOMAIN_RULES) == "deny"
        assert fetch("https://docs.python.org/3/", rules=DOMAIN_RULES) == "allow"

    def test_it_refuses_what_a_browser_would_not_fetch(self) -> None:
        assert fetch("http://a b/") == "deny"
        assert fetch("ftp://docs.python.org/") == "deny"


class WebFetchCorpusTests:
    @settings(max_examples=500, deadline=None)
    @given(
        address=st.sampled_from(PRIVATE),
        spelling=st.integers(min_value=0, max_value=14),
        shape=st.sampled_from(URL_SHAPES),
        mode=st.sampled_from(MODES),
    )
    def test_it_never_allows_a_private_address(self, address: str, spelling: int, shape: str, mode: str) -> None:
        url = shape.format(h=ipv4_spellings(address)[spelling])
        assert fetch(url, mode) in ("ask", "deny"), url

    @settings(max_examples=200, deadline=None)
    @given(
        sub=st.sampled_from(["x", "a.b", "WWW"]),
        dot=st.sampled_from([".", "\u3002", "\uff0e", "\uff61"]),
        tail=st.sampled_from(["", ".", ":443", "/path", "\\path", "?q"]),
        userinfo=st.sampled_from(["", "u@", "docs.python.org@", "u:p@"]),
    )
    def test_it_denies_every_spelling_of_a_denied_domain(self, sub: str, dot: str, tail: str, userinfo: str) -> None:
        url = f"https://{userinfo}{sub}{dot}evil{dot}com{tail}"
        assert fetch(url, rules=DOMAIN_RULES) == "deny", url
