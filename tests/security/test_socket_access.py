"""Who may open which WebSocket: every route by every kind of caller, and logout closes sockets.

Run against a real Daphne: the handshake, the Origin check and the session middleware
are exactly what a browser or an agent meets.
"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any
from unittest import mock
from urllib.error import HTTPError
from urllib.parse import urlencode, urlsplit
from urllib.request import HTTPRedirectHandler, Request, build_opener

import pytest
from django.core.management import call_command
from django.test import Client
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from approvals import services
from relay.routing import websocket_urlpatterns
from tests.live import LiveServer
from tests.relay.wsclient import ask_call, close_code, dashboard_connect, in_thread, receive, send, session_cookie

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


def http_form_post(srv: LiveServer, cookie: str, path: str, fields: dict[str, str]) -> int:
    """GET a form page for its CSRF cookie, then POST the form as a browser does; the status (302 = saved)."""
    opener = build_opener(NoRedirect())
    page = opener.open(Request(f"{srv.url}{path}", headers={"Cookie": f"sessionid={cookie}"}))
    csrf = next(
        c.split("=", 1)[1].split(";")[0] for c in page.headers.get_all("Set-Cookie") or [] if c.startswith("csrftoken=")
    )
    request = Request(
        f"{srv.url}{path}",
        data=urlencode({**fields, "csrfmiddlewaretoken": csrf}).encode(),
        method="POST",
        headers={"Cookie": f"sessionid={cookie}; csrftoken={csrf}", "Referer": srv.url + path},
    )
    try:
        return int(opener.open(request).status)
    except HTTPError as exc:
        return int(exc.code)


class NoRedirect(HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def change_own_password(srv: LiveServer, alice: Any, admin_cookie: str) -> int:
    cookie = session_cookie(alice)
    fields = {
        "old_password": "alice-password-1",
        "new_password1": "N3w-pass-phrase!",
        "new_password2": "N3w-pass-phrase!",
    }
    return http_form_post(srv, cookie, "/accounts/password_change/", fields)


def admin_sets_password(srv: LiveServer, alice: Any, admin_cookie: str) -> int:
    fields = {"password1": "N3w-pass-phrase!", "password2": "N3w-pass-phrase!", "usable_password": "true"}
    return http_form_post(srv, admin_cookie, f"/admin/auth/user/{alice.pk}/password/", fields)


def deactivate_by_service(srv: LiveServer, alice: Any, admin_cookie: str) -> int:
    services.person_deactivate(user=alice)
    return 302


def people_post(srv: LiveServer, admin_cookie: str, path: str, fields: dict[str, str]) -> int:
    """A team admin's form on the people page, posted as a browser does; the status (302 = done)."""
    opener = build_opener(NoRedirect())
    page = opener.open(Request(f"{srv.url}/people/", headers={"Cookie": f"sessionid={admin_cookie}"}))
    csrf = next(
        c.split("=", 1)[1].split(";")[0] for c in page.headers.get_all("Set-Cookie") or [] if c.startswith("csrftoken=")
    )
    request = Request(
        f"{srv.url}{path}",
        data=urlencode({**fields, "csrfmiddlewaretoken": csrf}).encode(),
        method="POST",
        headers={"Cookie": f"sessionid={admin_cookie}; csrftoken={csrf}", "Referer": srv.url + "/people/"},
    )
    try:
        return int(opener.open(request).status)
    except HTTPError as exc:
        return int(exc.code)


def removed_by_team_admin(srv: LiveServer, alice: Any, admin_cookie: str) -> int:
    """The people page's Remove (alice is in no other team, so she is deactivated)."""
    return people_post(srv, admin_cookie, f"/people/default/{alice.pk}/remove/", {})


def changepassword_command(srv: LiveServer, alice: Any, admin_cookie: str) -> int:
    """`manage.py changepassword alice` on the server, both prompts answered."""
    with mock.patch("getpass.getpass", return_value="N3w-pass-phrase!"):
        call_command("changepassword", alice.username, stdout=io.StringIO())
    return 302


def one_time_link(srv: LiveServer, alice: Any, admin_cookie: str) -> int:
    """A team admin's one-time link, opened and its form posted (Django's reset pages)."""
    client = Client()
    link = client.get(urlsplit(services.person_login_link(user=alice)).path)  # to the form, the token in the session
    fields = {"new_password1": "N3w-pass-phrase!", "new_password2": "N3w-pass-phrase!"}
    return int(client.post(link["Location"], fields).status_code)


CREDENTIAL_CHANGES = [
    change_own_password,
    admin_sets_password,
    changepassword_command,
    one_time_link,
    deactivate_by_service,
    removed_by_team_admin,
]


class CredentialChangeEndsSocketsTests:
    @pytest.mark.parametrize("change", CREDENTIAL_CHANGES, ids=lambda f: f.__name__)
    def test_it_closes_the_persons_dashboard_sockets_when_their_credentials_change(
        self, security_server: LiveServer, alice: Any, admin: Any, change: Any
    ) -> None:
        cookies = [session_cookie(alice), session_cookie(alice)]  # two devices
        admin_cookie = session_cookie(admin)

        async def scenario() -> tuple[int, list[int | None], str]:
            async with (
                dashboard_connect(security_server, cookies[0]) as phone,
                dashboard_connect(security_server, cookies[1]) as laptop,
            ):
                for ws in (phone, laptop):
                    await send(ws, {"type": "subscribe"})
                    assert (await receive(ws))["type"] == "snapshot"
                status = await in_thread(change, security_server, alice, admin_cookie)
                codes = [await close_code(phone), await close_code(laptop)]
            again = await dashboard_outcome(security_server, {"Cookie": f"sessionid={cookies[0]}"}, "-")
            return status, codes, again

        status, codes, again = asyncio.run(scenario())
        assert status == 302
        assert codes == [4401, 4401]
        assert again == "4401"  # the old session opens nothing any more

    def test_it_closes_the_persons_sockets_when_a_team_admin_changes_their_role(
        self, security_server: LiveServer, alice: Any, admin: Any
    ) -> None:
        """An approver made a viewer: every open page of theirs closes and re-reads what they may do."""
        from approvals.models import Membership

        cookies = [session_cookie(alice), session_cookie(alice)]  # two devices
        admin_cookie = session_cookie(admin)
        path = f"/people/default/{alice.pk}/role/"

        async def scenario() -> tuple[int, list[int | None], str]:
            async with (
                dashboard_connect(security_server, cookies[0]) as phone,
                dashboard_connect(security_server, cookies[1]) as laptop,
            ):
                for ws in (phone, laptop):
                    await send(ws, {"type": "subscribe"})
                    assert (await receive(ws))["type"] == "snapshot"
                status = await in_thread(people_post, security_server, admin_cookie, path, {"role": "viewer"})
                codes = [await close_code(phone), await close_code(laptop)]
            again = await dashboard_outcome(security_server, {"Cookie": f"sessionid={cookies[0]}"}, "-")
            return status, codes, again

        status, codes, again = asyncio.run(scenario())
        assert status == 302
        assert Membership.objects.get(user=alice).role == "viewer"
        assert codes == [4401, 4401]
        assert again == "open-"  # the session stays: a new page opens, as a viewer

    def test_it_closes_sockets_when_an_admin_unticks_active(
        self, security_server: LiveServer, alice: Any, admin: Any
    ) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.utils import timezone

        from approvals.models import Membership

        cookie = session_cookie(alice)
        client = Client()
        client.force_login(admin)
        joined = timezone.localtime(alice.date_joined)
        membership = Membership.objects.get(user=alice)
        # The admin's change form as a browser posts it, with "active" unticked (absent).
        fields = {
            "username": alice.username,
            "first_name": "",
            "last_name": "",
            "email": "",
            "date_joined_0": joined.strftime("%Y-%m-%d"),
            "date_joined_1": joined.strftime("%H:%M:%S"),
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "1",
            "memberships-MIN_NUM_FORMS": "0",
            "memberships-MAX_NUM_FORMS": "1000",
            "memberships-0-id": str(membership.pk),
            "memberships-0-user": str(alice.pk),
            "memberships-0-team": str(membership.team_id),
            "memberships-0-role": membership.role,
        }

        async def scenario() -> tuple[int, int | None]:
            async with dashboard_connect(security_server, cookie) as ws:
                await send(ws, {"type": "subscribe"})
                assert (await receive(ws))["type"] == "snapshot"
                response = await in_thread(client.post, f"/admin/auth/user/{alice.pk}/change/", fields)
                return response.status_code, await close_code(ws)

        status, code = asyncio.run(scenario())
        assert status == 302
        assert get_user_model().objects.get(pk=alice.pk).is_active is False
        assert code == 4401
