"""Which pages may open a dashboard socket: full origins, never the host alone, and '*' is not a wildcard.

The table runs against real Daphne servers (one with the default hosts, one with
`ALLOWED_HOSTS='*'`); the Hypothesis corpus varies scheme, host, port and spelling of
origins against the same check as it runs in the handshake.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from bench.ports import free_port
from relay.origins import origin_allowed, parse_origin
from tests.live import LiveServer, live_server
from tests.relay.wsclient import receive, send, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


def origin_variants(port: int) -> dict[str, bool]:
    """Origins a page could send to a server at 127.0.0.1:port, and whether each may open a socket."""
    return {
        f"http://127.0.0.1:{port}": True,
        f"HTTP://127.0.0.1:{port}": True,  # scheme and host compare case-insensitively
        f"https://127.0.0.1:{port}": False,  # another scheme
        f"http://127.0.0.1:{port + 1}": False,  # another local port (the reported attack)
        "http://127.0.0.1": False,
        "http://127.0.0.1:80": False,
        f"http://localhost:{port}": False,  # another host name for the same machine
        f"http://127.0.0.2:{port}": False,
        f"http://127.0.0.1.evil.example:{port}": False,
        f"http://evil.example:{port}": False,
        "https://evil.example": False,
        f"http://127.0.0.1:{port}/": False,  # not a serialized origin
        f"http://user@127.0.0.1:{port}": False,
        f"http://127.0.0.1:{port}@evil.example": False,
        "null": False,
        "": False,
        "file://": False,
    }


async def handshake(srv: LiveServer, cookie: str, origin: str | None) -> str:
    """'open' when the socket opens and answers a subscribe; 'refused' when the handshake gets a 4xx."""
    headers = {"Cookie": f"sessionid={cookie}"}
    if origin is not None:
        headers["Origin"] = origin
    try:
        async with connect(f"{srv.ws_url}/ws/dashboard/", additional_headers=headers, proxy=None) as ws:
            await send(ws, {"type": "subscribe"})
            return "open" if (await receive(ws))["type"] == "snapshot" else "other"
    except InvalidStatus as refused:
        # 403 from the origin check; an empty header is already refused (400) by the handshake.
        return "refused" if 400 <= refused.response.status_code < 500 else str(refused.response.status_code)


def outcomes(srv: LiveServer, cookie: str, origins: list[str | None]) -> dict[str | None, str]:
    async def run() -> dict[str | None, str]:
        return {origin: await handshake(srv, cookie, origin) for origin in origins}

    return asyncio.run(run())


@pytest.fixture(scope="module")
def wildcard_server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    """A server someone set up with ALLOWED_HOSTS='*' (which passes `check --deploy`)."""
    port = free_port()
    with (
        django_db_blocker.unblock(),
        live_server(port=port, ALLOWED_HOSTS="*", GATEHOUSE_PUBLIC_URL=f"http://127.0.0.1:{port}") as srv,
    ):
        yield srv


class DashboardOriginTableTests:
    def test_it_opens_a_dashboard_socket_only_for_the_servers_own_full_origin(
        self, security_server: LiveServer, alice: Any
    ) -> None:
        expected: dict[str | None, str] = {
            o: "open" if ok else "refused" for o, ok in origin_variants(security_server.port).items()
        }
        expected[None] = "refused"  # no Origin header at all
        actual = outcomes(security_server, session_cookie(alice), list(expected))
        assert actual == expected

    def test_it_does_not_treat_a_wildcard_allowed_host_as_any_origin(
        self, wildcard_server: LiveServer, alice: Any
    ) -> None:
        port = wildcard_server.port
        expected: dict[str | None, str] = {o: "open" if ok else "refused" for o, ok in origin_variants(port).items()}
        expected[None] = "refused"
        actual = outcomes(wildcard_server, session_cookie(alice), list(expected))
        assert actual == expected

    def test_it_refuses_a_page_whose_host_header_also_names_it_when_hosts_are_wildcard(
        self, wildcard_server: LiveServer, alice: Any
    ) -> None:
        # DNS rebinding: the attacker's name resolves here, so Host and Origin agree.
        cookie = session_cookie(alice)
        origin = f"http://evil.example:{wildcard_server.port}"

        async def run() -> str:
            headers = {"Cookie": f"sessionid={cookie}", "Origin": origin, "Host": origin.removeprefix("http://")}
            try:
                async with connect(f"{wildcard_server.ws_url}/ws/dashboard/", additional_headers=headers, proxy=None):
                    return "open"
            except InvalidStatus as refused:
                return str(refused.response.status_code)

        assert asyncio.run(run()) == "403"


def scope(origin: str | None, host: str, scheme: str = "ws") -> dict[str, Any]:
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode("latin-1")))
    return {"type": "websocket", "scheme": scheme, "headers": headers}


hosts = st.sampled_from(["127.0.0.1", "localhost", "gatehouse.example.com", "evil.example", "[::1]", "10.0.0.7"])
schemes = st.sampled_from(["http", "https", "HTTP", "Https", "ws", "ftp", ""])
ports = st.one_of(st.none(), st.sampled_from([80, 443, 8000, 8001, 8443]), st.integers(1, 65535))


@st.composite
def origins(draw: st.DrawFn) -> str:
    scheme, host, port = draw(schemes), draw(hosts), draw(ports)
    host = draw(st.sampled_from([host, host.upper()]))
    tail = draw(st.sampled_from(["", "", "", "/", "/x", "?a", "#f"]))
    return f"{scheme}://{host}" + (f":{port}" if port is not None else "") + tail


def expected_allowed(origin: str, accepted: set[tuple[str, str, int]]) -> bool:
    parsed = parse_origin(origin)
    return parsed is not None and parsed in accepted


class OriginCorpusTests:
    @settings(max_examples=400, deadline=None)
    @given(origin=origins(), wildcard=st.booleans())
    def test_it_accepts_exactly_the_own_and_public_origins_by_default(self, origin: str, wildcard: bool) -> None:
        allowed_hosts = ["*"] if wildcard else ["127.0.0.1", "gatehouse.example.com"]
        accepted = {("https", "gatehouse.example.com", 443)}  # the public URL
        if not wildcard:
            accepted.add(("http", "127.0.0.1", 8000))  # the socket's own origin
        with override_settings(
            ALLOWED_HOSTS=allowed_hosts,
            GATEHOUSE_ALLOWED_ORIGINS=[],
            PUBLIC_URL="https://gatehouse.example.com",
            CSRF_TRUSTED_ORIGINS=[],
        ):
            assert origin_allowed(scope(origin, "127.0.0.1:8000")) == expected_allowed(origin, accepted)

    @settings(max_examples=300, deadline=None)
    @given(origin=origins())
    def test_it_accepts_only_the_configured_list_when_one_is_given(self, origin: str) -> None:
        with override_settings(
            ALLOWED_HOSTS=["*"],
            GATEHOUSE_ALLOWED_ORIGINS=["https://gatehouse.example.com:8443", "http://10.0.0.7:8000"],
        ):
            accepted = {("https", "gatehouse.example.com", 8443), ("http", "10.0.0.7", 8000)}
            assert origin_allowed(scope(origin, "10.0.0.7:8000")) == expected_allowed(origin, accepted)

    @pytest.mark.parametrize(
        "origin",
        ["null", "", " ", "http://", "http://127.0.0.1:99999", "http://127.0.0.1:0x1f40", "http://a b:8000", None],
    )
    def test_it_refuses_origins_that_are_not_origins(self, origin: str | None) -> None:
        with override_settings(ALLOWED_HOSTS=["127.0.0.1"], GATEHOUSE_ALLOWED_ORIGINS=[]):
            assert origin_allowed(scope(origin, "127.0.0.1:8000")) is False

    def test_it_takes_the_socket_scheme_into_the_own_origin(self) -> None:
        with override_settings(
            ALLOWED_HOSTS=["127.0.0.1"], GATEHOUSE_ALLOWED_ORIGINS=[], PUBLIC_URL="https://gatehouse.example.com"
        ):
            assert origin_allowed(scope("https://127.0.0.1:8000", "127.0.0.1:8000", scheme="wss"))
            assert not origin_allowed(scope("http://127.0.0.1:8000", "127.0.0.1:8000", scheme="wss"))
