"""Who may open which WebSocket: every route by every kind of caller, and logout closes sockets.

Run against a real Daphne: the handshake, the Origin check and the session middleware
are exactly what a browser or an agent meets.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.request import Request, build_opener

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from approvals import services
from relay.routing import websocket_urlpatterns
from tests.live import LiveServer
from tests.relay.wsclient import ask_call, close_code, in_thread, receive, send, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

PERSONAS = [
    "anonymous",
    "wrong_token",
    "revoked_token",
    "person_token",
    "agent",
    "other_agent",
    "viewer",
    "approver",
    "outsider",
    "admin",
]

# "open" means the socket works for that caller; for dashboards "open+" / "open-" says
# whether the default team's pending request is in the caller's snapshot.
EXPECTED = {
    "ws/agent/": {
        "anonymous": "4401",
        "wrong_token": "4401",
        "revoked_token": "4403",
        "person_token": "4403",
        "agent": "open",
        "other_agent": "open",
        "viewer": "4401",
        "approver": "4401",
        "outsider": "4401",
        "admin": "4401",
    },
    "ws/dashboard/": {
        "anonymous": "4401",
        "wrong_token": "4401",
        "revoked_token": "4401",
        "person_token": "4401",
        "agent": "4401",
        "other_agent": "4401",
        "viewer": "open+",
        "approver": "open+",
        "outsider": "open-",
        "admin": "open+",
    },
}


def credentials(persona: str, people: dict[str, Any], tokens: dict[str, str]) -> dict[str, str]:
    if persona in people:
        return {"Cookie": f"sessionid={session_cookie(people[persona])}"}
    if persona in tokens:
        return {"Authorization": f"Bearer {tokens[persona]}"}
    return {}


async def agent_outcome(srv: LiveServer, headers: dict[str, str]) -> str:
    async with connect(f"{srv.ws_url}/ws/agent/", additional_headers=headers, proxy=None) as ws:
        try:
            await send(ws, {"type": "no-such-frame"})
            frame = await receive(ws)
            if frame.get("code") not in ("unauthenticated", "forbidden"):
                return "open"
        except ConnectionClosed:
            pass
        return str(await close_code(ws))


async def dashboard_outcome(srv: LiveServer, headers: dict[str, str], request_id: str) -> str:
    async with connect(
        f"{srv.ws_url}/ws/dashboard/",
        additional_headers=headers,
        origin=srv.url,  # type: ignore[arg-type]
        proxy=None,
    ) as ws:
        try:
            await send(ws, {"type": "subscribe"})
            while True:
                frame = await receive(ws)
                if frame.get("type") == "snapshot":
                    ids = {item["id"] for item in frame["requests"]}
                    return "open+" if request_id in ids else "open-"
                if frame.get("type") == "error":
                    break
        except ConnectionClosed:
            pass
        return str(await close_code(ws))


class SocketAccessMatrixTests:
    def test_it_has_a_row_for_every_websocket_route(self) -> None:
        assert {str(p.pattern) for p in websocket_urlpatterns} == set(EXPECTED)

    def test_it_gives_every_caller_exactly_the_expected_outcome_on_every_socket(
        self,
        security_server: LiveServer,
        ci_bot: Any,
        other_bot: Any,
        alice: Any,
        bob: Any,
        mallory: Any,
        admin: Any,
        default_team: Any,
    ) -> None:
        revoked, revoked_token = services.agent_create(name="retired-bot", team=default_team)
        services.agent_revoke(agent=revoked)
        tokens = {
            "wrong_token": "gha_not-a-real-token-at-all",
            "revoked_token": revoked_token,
            "person_token": services.personal_token_create(user=alice),
            "agent": ci_bot.token,
            "other_agent": other_bot.token,
        }
        people = {"viewer": bob, "approver": alice, "outsider": mallory, "admin": admin}
        pending = services.request_submit(agent=ci_bot.agent, call={**ask_call(), "tool_use_id": "ws-matrix"}).request
        headers = {p: credentials(p, people, tokens) for p in PERSONAS}

        async def table() -> dict[str, dict[str, str]]:
            return {
                "ws/agent/": {p: await agent_outcome(security_server, headers[p]) for p in PERSONAS},
                "ws/dashboard/": {
                    p: await dashboard_outcome(security_server, headers[p], str(pending.pk)) for p in PERSONAS
                },
            }

        actual = asyncio.run(table())
        assert actual == EXPECTED, json.dumps(actual, indent=1)

    def test_it_refuses_a_dashboard_socket_from_a_foreign_origin(self, security_server: LiveServer, alice: Any) -> None:
        cookie = session_cookie(alice)

        async def scenario() -> None:
            async with connect(
                f"{security_server.ws_url}/ws/dashboard/",
                origin="https://evil.example",  # type: ignore[arg-type]
                additional_headers={"Cookie": f"sessionid={cookie}"},
                proxy=None,
            ):
                pass

        with pytest.raises(InvalidStatus) as refused:
            asyncio.run(scenario())
        assert refused.value.response.status_code == 403


def http_logout(srv: LiveServer, cookie: str) -> int:
    """Log out through the real form: fetch a CSRF token, then POST with it, as a browser does."""
    opener = build_opener()
    page = opener.open(Request(f"{srv.url}/accounts/login/", headers={"Cookie": f"sessionid={cookie}"}))
    csrf = next(
        c.split("=", 1)[1].split(";")[0] for c in page.headers.get_all("Set-Cookie") or [] if c.startswith("csrftoken=")
    )
    request = Request(
        f"{srv.url}/accounts/logout/",
        data=b"",
        method="POST",
        headers={
            "Cookie": f"sessionid={cookie}; csrftoken={csrf}",
            "X-CSRFToken": csrf,
            "Referer": srv.url + "/",
        },
    )

    try:
        response = opener.open(request)
        return int(response.status)
    except Exception as exc:
        return int(getattr(exc, "code", 0))


class LogoutEndsSocketsTests:
    def test_it_closes_an_open_dashboard_socket_when_the_person_logs_out_over_http(
        self, security_server: LiveServer, alice: Any, ci_bot: Any
    ) -> None:
        cookie = session_cookie(alice)

        async def scenario() -> tuple[int | None, str]:
            async with connect(
                f"{security_server.ws_url}/ws/dashboard/",
                origin=security_server.url,  # type: ignore[arg-type]
                additional_headers={"Cookie": f"sessionid={cookie}"},
                proxy=None,
            ) as ws:
                await send(ws, {"type": "subscribe"})
                assert (await receive(ws))["type"] == "snapshot"
                await in_thread(http_logout, security_server, cookie)
                code = await close_code(ws)
            again = await dashboard_outcome(security_server, {"Cookie": f"sessionid={cookie}"}, "-")
            return code, again

        code, again = asyncio.run(scenario())
        assert code == 4401
        assert again == "4401"  # the old cookie opens nothing any more

    def test_it_stops_pushing_to_a_logged_out_socket(
        self, security_server: LiveServer, alice: Any, ci_bot: Any
    ) -> None:
        cookie = session_cookie(alice)

        async def scenario() -> list[dict[str, Any]]:
            frames: list[dict[str, Any]] = []
            async with connect(
                f"{security_server.ws_url}/ws/dashboard/",
                origin=security_server.url,  # type: ignore[arg-type]
                additional_headers={"Cookie": f"sessionid={cookie}"},
                proxy=None,
            ) as ws:
                await send(ws, {"type": "subscribe"})
                await receive(ws)
                await in_thread(http_logout, security_server, cookie)
                await in_thread(
                    services.request_submit, agent=ci_bot.agent, call={**ask_call(), "tool_use_id": "after-logout"}
                )
                try:
                    while True:
                        frames.append(json.loads(await asyncio.wait_for(ws.recv(), 15)))
                except ConnectionClosed:
                    pass
            return frames

        frames = asyncio.run(scenario())
        assert [f for f in frames if f.get("type") == "request.created"] == []
