"""Every team doorbell, caught on the real Redis, has the shape of its type.

A listener subscribes to the team's doorbells on the same Redis as a live server, as a
server process does (`approvals.teambus`), and a scenario makes the server and the
services send each kind of event: created, claimed, progress, decided, cancelled, expired.
"""

from __future__ import annotations

import asyncio
import queue
import time
from typing import Any

import pytest

from approvals import events, services
from approvals.event_schema import EVENT_TYPES, EventShapeError, check_event
from tests.relay.wsclient import (
    agent_connect,
    ask_call,
    dashboard_connect,
    in_thread,
    of_type,
    receive_until,
    send,
    session_cookie,
)
from tests.teamlisten import TeamListener, team_listener

pytestmark = pytest.mark.django_db(transaction=True)


def drain(listener: TeamListener, wanted: set[str], timeout: float = 20) -> list[dict[str, Any]]:
    """Every event the listener hears until each wanted type has arrived (or the timeout)."""
    caught: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while not wanted <= {e.get("type") for e in caught} and time.monotonic() < deadline:
        try:
            caught.append(listener.heard.get(timeout=max(deadline - time.monotonic(), 0.01))[1])
        except queue.Empty:
            break
    return caught


class EventSchemaTests:
    def test_every_event_a_scenario_sends_has_its_shape(
        self, relay_server: Any, alice: Any, ci_bot: Any, default_team: Any
    ) -> None:
        cookie = session_cookie(alice)
        wanted = {
            "request.created",
            "request.claimed",
            "request.progress",
            "request.decided",
            "request.cancelled",
            "request.expired",
        }

        async def scenario(listener: TeamListener) -> list[dict[str, Any]]:
            async with (
                dashboard_connect(relay_server, cookie) as dashboard,
                agent_connect(relay_server, ci_bot.token) as agent,
            ):
                await send(dashboard, {"type": "subscribe"})
                await receive_until(dashboard, of_type("snapshot"))
                ids = []
                for ref in ("a", "b", "c"):
                    await send(agent, {"type": "permission_request", "ref": ref, "request": ask_call(f"rm -r {ref}")})
                    ids.append((await receive_until(agent, of_type("pending", ref=ref)))["id"])
                await send(dashboard, {"type": "open", "id": ids[0]})
                await send(agent, {"type": "progress", "id": ids[0], "data": {"stdout": "…"}})
                await in_thread(
                    services.request_decide, ids[0], services.Answer(behavior="allow", surface="api", user=alice)
                )
                await send(agent, {"type": "cancel", "id": ids[1]})
                await in_thread(_expire, ids[2])
                return await in_thread(drain, listener, wanted)

        with team_listener(events.team_group(default_team.pk)) as listener:
            caught = asyncio.run(scenario(listener))
        assert wanted <= {e["type"] for e in caught}, caught
        for event in caught:
            check_event(event)
        assert {e["type"] for e in caught} <= EVENT_TYPES

    def test_it_refuses_an_event_out_of_shape(self) -> None:
        for event in (
            {"type": "request.created"},
            {"type": "request.created", "request_id": "x", "html": "<p>"},
            {
                "type": "request.decided",
                "request_id": "x",
                "decision_id": 1,
                "state": "pending",
                "behavior": "deny",
                "decided_by": "a",
                "surface": "web",
            },
            {"type": "request.reopened", "request_id": "x"},
            "request.created",
        ):
            with pytest.raises(EventShapeError):
                check_event(event)


def _expire(request_id: str) -> None:
    from approvals.models import PermissionRequest

    services.request_expire(request=PermissionRequest.objects.get(pk=request_id))
