"""WebFetch URLs read as the fetcher reads them: the WHATWG URL standard (via ada).

Claude Code fetches with undici, which follows the WHATWG URL standard: a backslash is
a slash in http(s) URLs, ideographic and full-width full stops (U+3002, U+FF0E,
U+FF61) are dots, host names go through IDNA, and ``0x7f000001``, ``2130706433``,
``0177.0.0.1`` and ``127.1`` are all 127.0.0.1. Python's ``urlsplit`` reads
``https://evil.com\\@docs.python.org/`` as a URL to docs.python.org; the fetcher
goes to evil.com. Domain rules and the private-address check use this parse only.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ada_url import URL

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Names that never leave the machine or the local network.
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa", ".lan", ".intranet")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@dataclass(frozen=True)
class WebUrl:
    """The scheme and host a WHATWG parser finds (host in ASCII, lower case, no brackets)."""

    scheme: str
    host: str
    ip: IPAddress | None


def parse_web_url(url: str) -> WebUrl | None:
    """Parse ``url``; None when a WHATWG parser rejects it or it has no host."""
    try:
        parsed = URL(url)
    except (ValueError, TypeError):
        return None
    host = parsed.hostname.lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        return None
    try:
        ip: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    return WebUrl(parsed.protocol.rstrip(":"), host, ip)


def private_reason(url: WebUrl) -> str | None:
    """Why ``url`` points at this machine or a private network, or None."""
    host = url.host.rstrip(".")
    if host == "localhost" or host.endswith(_LOCAL_SUFFIXES):
        return f"{url.host} is a local name"
    if url.ip is None:
        return None
    address = _embedded_ipv4(url.ip) or url.ip
    if (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_reserved
        or address.is_multicast
        or address.is_unspecified
        or (isinstance(address, ipaddress.IPv4Address) and address in ipaddress.IPv4Network("100.64.0.0/10"))
    ):
        return f"{url.host} is a local or private address ({address})"
    return None


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside ``::ffff:a.b.c.d``, ``::a.b.c.d``, NAT64 or 6to4 forms."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    packed = int(address)
    if address in _NAT64 or (packed >> 32 == 0 and packed > 1):
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF)
    return None
