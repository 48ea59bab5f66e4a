"""Idempotency: replays of one `tool_use_id`, concurrent and after a crash, are one request.

Chat-side duplicates are covered next to the bridges: Telegram updates delivered twice
(tests/relay/bridges/test_telegram_bot.py::…applies_each_once) and Slack retries
(tests/relay/bridges/test_slack_actions.py::…applies_a_retried_delivery_once).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from approvals import services
from approvals.models import Decision, PermissionRequest
from tests.live import LiveServer, live_server
from tests.reliability.clients import AgentSocket, Heard, call, heard_from_http, hook_submit, http_submit

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def replay_everywhere(srv: LiveServer, token: str, body: dict[str, Any], copies: int = 4) -> list[Heard]:
    """The same call, `copies` times at once through each door: HTTP, hook endpoint, socket."""

    async def scenario() -> list[Heard]:
        socket = await AgentSocket.open(srv, token)
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                jobs = []
                for _ in range(copies):
                    jobs += [
                        http_submit(client, srv, token, body),
                        hook_submit(client, srv, token, body),
                        socket.submit(body, timeout=5),
                    ]
                return list(await asyncio.gather(*jobs))
        finally:
            await socket.close()

    return asyncio.run(scenario())


class IdempotencyTests:
    def test_it_makes_one_request_and_one_decision_from_concurrent_replays(
        self, django_db_blocker: Any, ci_bot: Any, default_team: Any
    ) -> None:
        services.rule_create(rule="Bash(ls:*)", behavior="allow", source="projectSettings", team=default_team)
        with django_db_blocker.unblock(), live_server() as srv:
            heard = replay_everywhere(srv, ci_bot.token, call("ls -la", "toolu_same_allow"))
            asked = replay_everywhere(srv, ci_bot.token, call("rm -rf build", "toolu_same_ask"))
        assert {h.behavior for h in heard} == {"allow"}, heard
        assert PermissionRequest.objects.filter(tool_use_id="toolu_same_allow").count() == 1
        assert Decision.objects.filter(request__tool_use_id="toolu_same_allow").count() == 1
        assert {h.request_id for h in heard if h.request_id} == {
            str(PermissionRequest.objects.get(tool_use_id="toolu_same_allow").pk)
        }
        assert {h.behavior for h in asked} == {"pending"}, asked
        assert PermissionRequest.objects.filter(tool_use_id="toolu_same_ask").count() == 1

    def test_it_returns_the_same_request_and_decision_after_a_crash(
        self, django_db_blocker: Any, ci_bot: Any, alice: Any, default_team: Any
    ) -> None:
        services.rule_create(rule="Bash(ls:*)", behavior="allow", source="projectSettings", team=default_team)
        with django_db_blocker.unblock(), live_server() as srv:
            first_allow = heard_from_http(
                httpx.post(
                    f"{srv.url}/api/v1/permission-requests",
                    json=call("ls", "toolu_crash_allow"),
                    timeout=30,
                    headers={"Authorization": f"Bearer {ci_bot.token}"},
                )
            )
            first_ask = heard_from_http(
                httpx.post(
                    f"{srv.url}/api/v1/permission-requests",
                    json=call("rm -rf build", "toolu_crash_ask"),
                    timeout=30,
                    headers={"Authorization": f"Bearer {ci_bot.token}"},
                )
            )
            srv.kill()
        with django_db_blocker.unblock(), live_server() as srv:
            again_allow = replay_everywhere(srv, ci_bot.token, call("ls", "toolu_crash_allow"), copies=2)
            again_ask = replay_everywhere(srv, ci_bot.token, call("rm -rf build", "toolu_crash_ask"), copies=2)
            services.request_decide(first_ask.request_id, services.Answer(behavior="deny", surface="api", user=alice))
            decided = replay_everywhere(srv, ci_bot.token, call("rm -rf build", "toolu_crash_ask"), copies=2)
        assert first_allow.behavior == "allow" and first_ask.behavior == "pending"
        assert {(h.behavior, h.request_id or first_allow.request_id) for h in again_allow} == {
            ("allow", first_allow.request_id)
        }
        assert {h.request_id for h in again_ask if h.request_id} == {first_ask.request_id}
        assert {h.behavior for h in again_ask} == {"pending"}
        assert {h.behavior for h in decided} == {"deny"}
        assert Decision.objects.filter(request__tool_use_id__in=["toolu_crash_allow", "toolu_crash_ask"]).count() == 2

    def test_it_never_hands_an_earlier_allow_to_a_different_call_reusing_the_id(
        self, django_db_blocker: Any, ci_bot: Any, default_team: Any
    ) -> None:
        services.rule_create(rule="Bash(ls:*)", behavior="allow", source="projectSettings", team=default_team)
        with django_db_blocker.unblock(), live_server() as srv:
            first = replay_everywhere(srv, ci_bot.token, call("ls", "toolu_reused"), copies=1)
            reused = replay_everywhere(srv, ci_bot.token, call("rm -rf ~", "toolu_reused"), copies=1)
        assert {h.behavior for h in first} == {"allow"}
        assert [h for h in reused if h.behavior == "allow"] == [], reused
