"""The dashboard socket: session auth, origin check, snapshot, live pushes, team isolation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.auth import UserLazyObject
from django.contrib.auth.models import AnonymousUser
from websockets.exceptions import InvalidStatus

from approvals import services
from relay import race
from relay.consumers.dashboard import resolved_user
from tests.live import LiveServer
from tests.relay.wsclient import (
    agent_connect,
    ask_call,
    close_code,
    dashboard_connect,
    in_thread,
    of_type,
    receive,
    receive_until,
    send,
    session_cookie,
)

pytestmark = pytest.mark.django_db(transaction=True)


class DashboardAuthTests:
    def test_it_closes_4401_for_anonymous_visitors(self, relay_server: LiveServer) -> None:
        async def scenario() -> int | None:
            async with dashboard_connect(relay_server, None) as ws:
                return await close_code(ws)

        assert asyncio.run(scenario()) == 4401

    def test_it_refuses_other_origins(self, relay_server: LiveServer, alice: Any) -> None:
        cookie = session_cookie(alice)

        async def scenario() -> None:
            async with dashboard_connect(relay_server, cookie, origin="https://evil.example"):
                pass

        with pytest.raises(InvalidStatus) as refused:
            asyncio.run(scenario())
        assert refused.value.response.status_code == 403

    def test_it_closes_every_socket_of_a_user_who_logs_out(self, relay_server: LiveServer, alice: Any) -> None:
        from approvals.events import end_user_sessions

        cookie = session_cookie(alice)

        async def scenario() -> list[int | None]:
            async with dashboard_connect(relay_server, cookie) as phone, dashboard_connect(relay_server, cookie) as pc:
                for ws in (phone, pc):
                    await send(ws, {"type": "subscribe"})
                    await receive_until(ws, of_type("snapshot"))
                await in_thread(end_user_sessions, alice.pk)
                return [await close_code(phone), await close_code(pc)]

        assert asyncio.run(scenario()) == [4401, 4401]


class DashboardPushTests:
    def test_it_sends_a_snapshot_of_pending_requests_after_subscribe(
        self, relay_server: LiveServer, alice: Any, ci_bot: Any
    ) -> None:
        waiting = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
        cookie = session_cookie(alice)

        async def scenario() -> dict[str, Any]:
            async with dashboard_connect(relay_server, cookie) as ws:
                await send(ws, {"type": "subscribe"})
                return await receive(ws)

        snapshot = asyncio.run(scenario())
        assert snapshot["type"] == "snapshot"
        assert [r["id"] for r in snapshot["requests"]] == [str(waiting.pk)]
        assert "build" in snapshot["requests"][0]["html"]

    def test_it_pushes_created_progress_and_decided_with_the_winner(
        self, relay_server: LiveServer, alice: Any, bob: Any, ci_bot: Any
    ) -> None:
        cookie = session_cookie(bob)

        async def scenario() -> list[dict[str, Any]]:
            async with (
                dashboard_connect(relay_server, cookie) as board,
                agent_connect(relay_server, ci_bot.token) as agent,
            ):
                await send(board, {"type": "subscribe"})
                await receive_until(board, of_type("snapshot"))
                await send(agent, {"type": "permission_request", "ref": "r", "request": ask_call()})
                pending = await receive_until(agent, of_type("pending"))
                created = await receive_until(board, of_type("request.created"))
                await in_thread(
                    race.answer, pending["id"], services.Answer(behavior="allow", surface="telegram", user=alice)
                )
                decided = await receive_until(board, of_type("request.decided"))
                await receive_until(agent, of_type("decision"))
                await send(agent, {"type": "progress", "id": pending["id"], "data": {"stdout": "removed 3 files"}})
                progress = await receive_until(board, of_type("request.progress"))
                return [pending, created, decided, progress]

        pending, created, decided, progress = asyncio.run(scenario())
        assert created["id"] == pending["id"] and "build" in created["html"]
        assert decided["id"] == pending["id"]
        assert decided["decided_by"] == "alice" and decided["surface"] == "telegram"
        assert "alice" in decided["html"]
        assert progress == {"type": "request.progress", "id": pending["id"], "data": {"stdout": "removed 3 files"}}

    def test_it_tells_others_who_is_reviewing(
        self, relay_server: LiveServer, alice: Any, bob: Any, ci_bot: Any
    ) -> None:
        request = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
        alice_cookie, bob_cookie = session_cookie(alice), session_cookie(bob)

        async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
            async with (
                dashboard_connect(relay_server, alice_cookie) as mine,
                dashboard_connect(relay_server, bob_cookie) as theirs,
            ):
                for ws in (mine, theirs):
                    await send(ws, {"type": "subscribe"})
                    await receive_until(ws, of_type("snapshot"))
                await send(mine, {"type": "open", "id": str(request.pk)})
                claimed = await receive_until(theirs, of_type("request.claimed"))
                await send(mine, {"type": "close", "id": str(request.pk)})
                released = await receive_until(theirs, of_type("request.released"))
                # Alice is not told about her own review: the next frame she sees is the answer to a ping.
                await send(mine, {"type": "ping"})
                own = await receive(mine)
                return claimed, {"released": released, "own": own}

        claimed, rest = asyncio.run(scenario())
        assert claimed == {"type": "request.claimed", "id": str(request.pk), "by": "alice"}
        assert rest["released"]["by"] == "alice"
        assert rest["own"]["type"] == "error" and rest["own"]["code"] == "unknown_type"

    def test_it_shows_nothing_of_other_teams(
        self, relay_server: LiveServer, mallory: Any, ci_bot: Any, other_bot: Any
    ) -> None:
        hidden = services.request_submit(agent=ci_bot.agent, call=ask_call("rm -rf secret-default")).request
        cookie = session_cookie(mallory)

        async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
            async with dashboard_connect(relay_server, cookie) as ws:
                await send(ws, {"type": "subscribe"})
                snapshot = await receive(ws)
                await in_thread(services.request_submit, agent=ci_bot.agent, call=ask_call("rm -rf x", tool_use_id="x"))
                await in_thread(services.request_submit, agent=other_bot.agent, call=ask_call("rm -rf mine"))
                # The first push Mallory gets is her own team's request, not the default team's.
                first = await receive_until(ws, of_type("request.created"))
                await send(ws, {"type": "open", "id": str(hidden.pk)})
                refused = await receive_until(ws, of_type("error"))
                return snapshot, first, refused

        snapshot, first, refused = asyncio.run(scenario())
        assert snapshot["requests"] == []
        assert "mine" in first["html"] and "secret" not in first["html"]
        assert refused["code"] == "not_found"


class LostDoorbellTests:
    @pytest.mark.parametrize("state", ["decided", "cancelled", "expired"])
    def test_a_card_whose_end_was_never_announced_is_ended_by_the_recheck(
        self, relay_server: LiveServer, alice: Any, ci_bot: Any, state: str
    ) -> None:
        """The channel layer rings at most once: the socket asks the database about the cards it shows."""
        from approvals.models import PermissionRequest

        waiting = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
        cookie = session_cookie(alice)

        async def scenario() -> dict[str, Any]:
            async with dashboard_connect(relay_server, cookie) as ws:
                await send(ws, {"type": "subscribe"})
                await receive_until(ws, of_type("snapshot"))
                # Ended with no announcement: what a socket sees when the doorbell is lost.
                await in_thread(lambda: PermissionRequest.objects.filter(pk=waiting.pk).update(state=state))
                return await receive_until(ws, of_type(f"request.{state}", id=str(waiting.pk)))

        ended = asyncio.run(scenario())
        assert 'data-state="pending"' not in ended["html"]


class ResolvedUserTests:
    def test_the_socket_holds_the_person_the_middleware_resolved_not_its_wrapper(self, alice: Any) -> None:
        resolved = UserLazyObject()
        resolved._wrapped = alice  # as channels' AuthMiddleware resolves the scope's user
        anonymous = UserLazyObject()
        anonymous._wrapped = AnonymousUser()
        unresolved = UserLazyObject()

        assert type(resolved_user(resolved)) is type(alice) and resolved_user(resolved).pk == alice.pk
        assert type(resolved_user(anonymous)) is AnonymousUser
        assert resolved_user(unresolved) is unresolved  # nothing to unwrap: left as it is
        assert resolved_user(alice) is alice and resolved_user(None) is None
