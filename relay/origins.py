"""Which web pages may open a dashboard socket: full origins (scheme, host, port), never a host alone.

A browser sends the session cookie with any WebSocket to this server, whatever page opened
it, so the `Origin` header is the only thing telling the dashboard from a page on another
site or another local port. An origin is accepted when it equals, after normalising case
and the default port:

- an entry of `GATEHOUSE_ALLOWED_ORIGINS`, when that setting is given (then it is the whole list);
- otherwise the server's own origin as the socket reached it (the socket's scheme and its
  `Host` header) when that host is named in `ALLOWED_HOSTS` — a `'*'` entry names no host,
  so it never widens this — or the origin of `GATEHOUSE_PUBLIC_URL`, or an entry of
  `CSRF_TRUSTED_ORIGINS` (the addresses a TLS proxy serves the dashboard at).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http.request import split_domain_port, validate_host

Origin = tuple[str, str, int]
DEFAULT_PORTS = {"http": 80, "https": 443}
SOCKET_SCHEMES = {"ws": "http", "wss": "https"}
# What a serialized origin's host can hold (a DNS name, IPv4, or IPv6 between brackets).
HOST_CHARACTERS = re.compile(r"[a-z0-9.:\-]+", re.IGNORECASE)


def parse_origin(text: str) -> Origin | None:
    """A serialized origin as browsers send it (`scheme://host[:port]`), or None for anything else."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.username is not None or parts.password is not None:
        return None
    if parts.path or parts.query or parts.fragment or not HOST_CHARACTERS.fullmatch(parts.hostname):
        return None
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]


def configured_origins(entries: Iterable[str], setting: str) -> frozenset[Origin]:
    """Parse a setting's origins; a malformed entry stops start-up rather than silently matching nothing."""
    origins = set()
    for entry in entries:
        origin = parse_origin(entry)
        if origin is None:
            raise ImproperlyConfigured(f"{setting}: {entry!r} is not an origin like https://gatehouse.example.com:8443")
        origins.add(origin)
    return frozenset(origins)


def own_origin(socket_scheme: str, host_header: str, allowed_hosts: list[str]) -> Origin | None:
    """The origin this socket was reached at, if its host is one `ALLOWED_HOSTS` names (not by '*')."""
    scheme = SOCKET_SCHEMES.get(socket_scheme)
    domain, _port = split_domain_port(host_header)
    named = [host for host in allowed_hosts if host != "*"]
    if scheme is None or not domain or not validate_host(domain, named):
        return None
    return parse_origin(f"{scheme}://{host_header}")


def accepted_origins(socket_scheme: str, host_header: str) -> frozenset[Origin]:
    explicit = getattr(settings, "GATEHOUSE_ALLOWED_ORIGINS", [])
    if explicit:
        return configured_origins(explicit, "GATEHOUSE_ALLOWED_ORIGINS")
    origins = set(configured_origins([settings.PUBLIC_URL], "GATEHOUSE_PUBLIC_URL"))
    origins |= configured_origins([o for o in settings.CSRF_TRUSTED_ORIGINS if "*" not in o], "CSRF_TRUSTED_ORIGINS")
    own = own_origin(socket_scheme, host_header, list(settings.ALLOWED_HOSTS))
    return frozenset(origins | {own}) if own else frozenset(origins)


def check_settings() -> None:
    """Refuse to start on an origin setting that could never match (a typo would lock the dashboard out)."""
    configured_origins(getattr(settings, "GATEHOUSE_ALLOWED_ORIGINS", []), "GATEHOUSE_ALLOWED_ORIGINS")
    configured_origins([settings.PUBLIC_URL], "GATEHOUSE_PUBLIC_URL")


def origin_allowed(scope: dict[str, Any]) -> bool:
    headers = dict(scope.get("headers") or [])
    origin_header = headers.get(b"origin")
    host_header = headers.get(b"host", b"")
    if origin_header is None:
        return False
    origin = parse_origin(origin_header.decode("latin-1"))
    allowed = accepted_origins(str(scope.get("scheme", "ws")), host_header.decode("latin-1"))
    return origin is not None and origin in allowed


class DashboardOriginValidator:
    """ASGI middleware: refuse the handshake (HTTP 403) unless the page's origin is accepted."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
