"""Without Redis: the in-process claim store and channel layer serve one process fully."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from approvals import services
from approvals.models import Decision
from tests.live import live_server
from tests.relay.wsclient import (
    agent_connect,
    ask_call,
    dashboard_connect,
    of_type,
    receive_until,
    send,
    session_cookie,
)

pytestmark = pytest.mark.django_db(transaction=True)


class EmbeddedModeTests:
    def test_one_process_without_redis_runs_the_whole_race(self, ci_bot: Any, alice: Any) -> None:
        token = services.personal_token_create(user=alice)
        with live_server(REDIS_URL="") as srv:

            async def scenario() -> tuple[dict[str, Any], list[int]]:
                async with (
                    agent_connect(srv, ci_bot.token) as agent,
                    httpx.AsyncClient(
                        base_url=srv.url, timeout=20, headers={"Authorization": f"Bearer {token}"}
                    ) as api,
                ):
                    await send(agent, {"type": "permission_request", "ref": "r", "request": ask_call()})
                    request_id = (await receive_until(agent, of_type("pending")))["id"]
                    url = f"/api/v1/permission-requests/{request_id}/decision"
                    responses = await asyncio.gather(
                        *(api.post(url, json={"behavior": b}) for b in ("allow", "deny", "allow"))
                    )
                    # Within 3 s: the in-memory doorbell, not the 5 s database re-check.
                    return await receive_until(agent, of_type("decision"), timeout=3), sorted(
                        r.status_code for r in responses
                    )

            decision, statuses = asyncio.run(scenario())
            log = srv.log()
        assert statuses == [200, 409, 409]
        assert Decision.objects.filter(request_id=decision["id"]).count() == 1
        assert "single server process only" in log

    def test_one_process_without_redis_pushes_its_teams_cards(self, ci_bot: Any, alice: Any) -> None:
        cookie = session_cookie(alice)
        token = services.personal_token_create(user=alice)
        with live_server(REDIS_URL="") as srv:

            async def scenario() -> tuple[str, dict[str, Any], dict[str, Any]]:
                async with (
                    dashboard_connect(srv, cookie) as dashboard,
                    agent_connect(srv, ci_bot.token) as agent,
                    httpx.AsyncClient(
                        base_url=srv.url, timeout=20, headers={"Authorization": f"Bearer {token}"}
                    ) as api,
                ):
                    await send(dashboard, {"type": "subscribe"})
                    await receive_until(dashboard, of_type("snapshot"))
                    await send(agent, {"type": "permission_request", "ref": "r", "request": ask_call()})
                    request_id = (await receive_until(agent, of_type("pending")))["id"]
                    # Only the process's own doorbell brings a new card (the socket's re-check
                    # ends the cards it shows, and sends none).
                    created = await receive_until(dashboard, of_type("request.created", id=request_id))
                    url = f"/api/v1/permission-requests/{request_id}/decision"
                    answer = await api.post(url, json={"behavior": "deny"})
                    assert answer.status_code == 200, answer.text
                    decided = await receive_until(dashboard, of_type("request.decided", id=request_id))
                    return request_id, created, decided

            request_id, created, decided = asyncio.run(scenario())
        assert f'data-id="{request_id}"' in created["html"]
        assert decided["behavior"] == "deny"
