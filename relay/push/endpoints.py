"""Which push endpoints the server will post to: the SSRF guard of Web Push.

A subscription's endpoint is a URL a person's browser hands the server, and the server
then POSTs to it. Without a check, anyone with a login could make the server call any
address it can reach (cloud metadata, an admin port on localhost). So an endpoint must
name a host in `GATEHOUSE_PUSH_SERVICES` (default: the major browsers' push services),
over https on the default port; plain http, on any port, only for a loopback host that
the list names itself (how the tests point it at a fake).

The URL is read by the WHATWG standard (ada, as browsers write it) and must read the
same to urllib3, which sends it; userinfo, backslashes, whitespace and control
characters are refused rather than normalised, so no two parsers can disagree on it.
"""

from __future__ import annotations

import ipaddress
import re

from ada_url import URL
from django.conf import settings
from urllib3.util import parse_url

DEFAULT_PUSH_SERVICES = (
    "fcm.googleapis.com",  # Chrome, Edge on Android, Opera, Samsung Internet
    "updates.push.services.mozilla.com",  # Firefox
    "web.push.apple.com",  # Safari (macOS, iOS home-screen apps)
    "*.notify.windows.com",  # Edge on Windows (wns2-*.notify.windows.com)
)
MAX_ENDPOINT_CHARS = 2000
_UNSAFE = re.compile(r"[\x00-\x20\x7f\\]|%(?:0|1|2[0eE]|5[cC]|7[fF])")


class EndpointRefused(ValueError):
    """The endpoint is not a push service this server posts to (the message says why)."""


def push_services() -> list[str]:
    return [host.strip().lower() for host in settings.GATEHOUSE_PUSH_SERVICES if host.strip()]


def check_endpoint(endpoint: str, services: list[str] | None = None) -> str:
    """The endpoint, normalised, if it names an allowed push service; else EndpointRefused."""
    services = push_services() if services is None else services
    if not isinstance(endpoint, str) or not endpoint or len(endpoint) > MAX_ENDPOINT_CHARS:
        raise EndpointRefused(f"endpoint must be a URL of at most {MAX_ENDPOINT_CHARS} characters")
    if _UNSAFE.search(endpoint):
        raise EndpointRefused("endpoint contains whitespace, a control character, a backslash or an encoded one")
    try:
        url = URL(endpoint)
    except (ValueError, TypeError):
        raise EndpointRefused("endpoint is not a URL") from None
    host = url.hostname.lower()
    if url.username or url.password or "@" in endpoint.split("?", 1)[0]:
        raise EndpointRefused("endpoint must not carry a user name or password")
    if url.protocol not in ("https:", "http:"):
        raise EndpointRefused("endpoint must be an https URL")
    loopback = _is_loopback(host)
    if not _listed(host, services, exact_only=loopback):
        raise EndpointRefused(f"{host or 'that host'} is not a push service this server uses (GATEHOUSE_PUSH_SERVICES)")
    if url.protocol == "http:" and not loopback:
        raise EndpointRefused("endpoint must be an https URL")
    if url.port and not loopback:
        raise EndpointRefused("endpoint must use the push service's default port")
    normalised = url.href
    sent = parse_url(normalised)
    if (sent.host or "").lower().strip("[]") != host.strip("[]") or sent.auth:
        raise EndpointRefused("endpoint reads differently to the HTTP client; refused")
    return normalised


def _listed(host: str, services: list[str], *, exact_only: bool) -> bool:
    if host in services:
        return True
    if exact_only or not host or host.endswith("."):
        return False
    return any(entry.startswith("*.") and host.endswith(entry[1:]) and len(host) > len(entry) - 1 for entry in services)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
