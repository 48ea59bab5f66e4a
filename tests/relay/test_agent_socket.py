"""The agent socket: handshake auth, asks in flight, decisions, cancel, resume, tool results."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from approvals import services
from approvals.models import Decision, PermissionRequest
from relay import race
from tests.live import LiveServer
from tests.relay.wsclient import (
    agent_connect,
    ask_call,
    close_code,
    in_thread,
    of_type,
    receive,
    receive_until,
    send,
)

pytestmark = pytest.mark.django_db(transaction=True)


class AgentHandshakeTests:
    def test_it_closes_4401_without_a_token(self, relay_server: LiveServer, ci_bot: Any) -> None:
        async def scenario() -> int | None:
            async with agent_connect(relay_server, None) as ws:
                return await close_code(ws)

        assert asyncio.run(scenario()) == 4401

    def test_it_closes_4401_for_a_wrong_token(self, relay_server: LiveServer, ci_bot: Any) -> None:
        async def scenario() -> int | None:
            async with agent_connect(relay_server, "gha_not-a-real-token") as ws:
                return await close_code(ws)

        assert asyncio.run(scenario()) == 4401

    def test_it_closes_4403_for_a_revoked_token(self, relay_server: LiveServer, ci_bot: Any) -> None:
        services.agent_revoke(agent=ci_bot.agent)

        async def scenario() -> int | None:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                return await close_code(ws)

        assert asyncio.run(scenario()) == 4403


class AgentAskTests:
    def test_it_sends_pending_then_the_decision_of_whoever_answers(
        self, relay_server: LiveServer, ci_bot: Any, alice: Any
    ) -> None:
        async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                await send(ws, {"type": "permission_request", "ref": "r1", "request": ask_call()})
                pending = await receive_until(ws, of_type("pending", ref="r1"))
                await in_thread(
                    race.answer, pending["id"], services.Answer(behavior="allow", surface="web", user=alice)
                )
                return pending, await receive_until(ws, of_type("decision", ref="r1"))

        pending, decision = asyncio.run(scenario())
        assert decision["id"] == pending["id"]
        assert decision["decision"]["behavior"] == "allow"
        assert decision["decision"]["decided_by"] == "alice"
        assert decision["decision"]["surface"] == "web"
        assert Decision.objects.filter(request_id=pending["id"]).count() == 1

    def test_it_answers_engine_decisions_at_once(self, relay_server: LiveServer, ci_bot: Any) -> None:
        services.rule_create(rule="Bash(ls:*)", behavior="allow", source="projectSettings", team=ci_bot.agent.team)

        async def scenario() -> dict[str, Any]:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                await send(ws, {"type": "permission_request", "ref": "r1", "request": ask_call("ls -la")})
                return await receive(ws)

        frame = asyncio.run(scenario())
        assert frame["type"] == "decision" and frame["ref"] == "r1"
        assert frame["decision"]["behavior"] == "allow"
        assert frame["decision"]["reason"]["type"] == "rule"

    def test_it_keeps_many_requests_in_flight_on_one_socket(
        self, relay_server: LiveServer, ci_bot: Any, alice: Any
    ) -> None:
        async def scenario() -> dict[str, dict[str, Any]]:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                for n in range(10):
                    await send(
                        ws,
                        {
                            "type": "permission_request",
                            "ref": f"r{n}",
                            "request": ask_call(f"rm -rf build{n}", tool_use_id=f"t{n}"),
                        },
                    )
                ids: dict[str, str] = {}
                while len(ids) < 10:
                    frame = await receive_until(ws, of_type("pending"))
                    ids[frame["ref"]] = frame["id"]
                # Answer in reverse order: each decision must reach its own ref.
                for n in reversed(range(10)):
                    await in_thread(
                        race.answer,
                        ids[f"r{n}"],
                        services.Answer(behavior="deny" if n % 2 else "allow", surface="api", user=alice),
                    )
                decisions: dict[str, dict[str, Any]] = {}
                while len(decisions) < 10:
                    frame = await receive_until(ws, of_type("decision"))
                    assert frame["ref"] not in decisions, "a decision was delivered twice"
                    assert frame["id"] == ids[frame["ref"]]
                    decisions[frame["ref"]] = frame
                return decisions

        decisions = asyncio.run(scenario())
        assert {ref: d["decision"]["behavior"] for ref, d in decisions.items()} == {
            f"r{n}": "deny" if n % 2 else "allow" for n in range(10)
        }

    def test_it_cancels_a_request_everywhere(self, relay_server: LiveServer, ci_bot: Any) -> None:
        async def scenario() -> dict[str, Any]:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                await send(ws, {"type": "permission_request", "ref": "r1", "request": ask_call()})
                pending = await receive_until(ws, of_type("pending"))
                await send(ws, {"type": "cancel", "id": pending["id"], "reason": "answered locally"})
                return await receive_until(ws, of_type("decision", ref="r1"))

        frame = asyncio.run(scenario())
        assert frame["status"] == "cancelled"
        assert frame["decision"]["behavior"] == "deny"
        assert frame["decision"]["reason"]["type"] == "cancelled"
        request = PermissionRequest.objects.get(pk=frame["id"])
        assert request.state == "cancelled"
        assert Decision.objects.filter(request=request).count() == 1

    def test_it_resumes_after_a_reconnect_with_decisions_it_missed(
        self, relay_server: LiveServer, ci_bot: Any, alice: Any
    ) -> None:
        async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                for ref in ("a", "b"):
                    await send(
                        ws,
                        {
                            "type": "permission_request",
                            "ref": ref,
                            "request": ask_call(f"rm -rf {ref}", tool_use_id=ref),
                        },
                    )
                # Submissions run side by side: the pendings may come in either order.
                pendings = [await receive_until(ws, of_type("pending")) for _ in range(2)]
                first, second = sorted(pendings, key=lambda frame: frame["ref"])
            # Offline: "a" is decided while nobody listens.
            outcome = await in_thread(
                race.answer, first["id"], services.Answer(behavior="allow", surface="web", user=alice)
            )
            assert outcome.won, outcome
            async with agent_connect(relay_server, ci_bot.token) as ws:
                await send(
                    ws, {"type": "resume", "ids": [{"id": first["id"], "ref": "a"}, {"id": second["id"], "ref": "b"}]}
                )
                replies = {frame["type"]: frame for frame in [await receive(ws), await receive(ws)]}
                missed, still = replies["decision"], replies["pending"]
                # And "b", decided after the resume, still arrives on the new socket.
                await in_thread(race.answer, second["id"], services.Answer(behavior="deny", surface="web", user=alice))
                later = await receive_until(ws, of_type("decision"))
                assert still["id"] == second["id"]
                return missed, later

        missed, later = asyncio.run(scenario())
        assert missed["ref"] == "a" and missed["decision"]["behavior"] == "allow"
        assert later["ref"] == "b" and later["decision"]["behavior"] == "deny"

    def test_it_refuses_to_resume_another_agents_request(
        self, relay_server: LiveServer, ci_bot: Any, other_bot: Any
    ) -> None:
        theirs = services.request_submit(agent=other_bot.agent, call=ask_call()).request

        async def scenario() -> dict[str, Any]:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                await send(ws, {"type": "resume", "ids": [str(theirs.pk)]})
                return await receive(ws)

        frame = asyncio.run(scenario())
        assert frame["type"] == "error" and frame["code"] == "not_found"

    def test_it_records_tool_results_against_the_request(
        self, relay_server: LiveServer, ci_bot: Any, alice: Any
    ) -> None:
        async def scenario() -> str:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                await send(ws, {"type": "permission_request", "ref": "r1", "request": ask_call()})
                pending = await receive_until(ws, of_type("pending"))
                await in_thread(
                    race.answer, pending["id"], services.Answer(behavior="allow", surface="web", user=alice)
                )
                await receive_until(ws, of_type("decision"))
                await send(
                    ws,
                    {
                        "type": "tool_result",
                        "id": pending["id"],
                        "ok": False,
                        "error": "exit 1",
                        "error_class": "Error:ENOENT",
                    },
                )
                # An unknown frame after it is answered in order, so the result is stored by then.
                await send(ws, {"type": "ping"})
                await receive_until(ws, of_type("error", code="unknown_type"))
                return str(pending["id"])

        request_id = asyncio.run(scenario())
        assert PermissionRequest.objects.get(pk=request_id).result == {"ok": False, "error": "exit 1"}
        metrics = httpx.get(f"{relay_server.url}/metrics", timeout=10).text
        assert 'gatehouse_tool_errors_total{error="Error:ENOENT"}' in metrics

    def test_it_applies_the_harness_hook_outputs_and_refuses_unknown_fields(
        self, relay_server: LiveServer, ci_bot: Any
    ) -> None:
        hooked = ask_call(
            pre_tool_use_hooks=[
                {"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "local policy"}}
            ]
        )
        unknown = ask_call(tool_use_id="t2", priority="high")

        async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
            async with agent_connect(relay_server, ci_bot.token) as ws:
                await send(ws, {"type": "permission_request", "ref": "r1", "request": hooked})
                denied = await receive(ws)
                await send(ws, {"type": "permission_request", "ref": "r2", "request": unknown})
                return denied, await receive(ws)

        denied, refused = asyncio.run(scenario())
        assert denied["type"] == "decision" and denied["decision"]["behavior"] == "deny"
        assert denied["decision"]["reason"]["type"] == "hook"
        assert refused == {"type": "error", "code": "invalid_request", "ref": "r2", "message": refused["message"]}
        assert "priority" in refused["message"]
        assert PermissionRequest.objects.count() == 1


class OwedDecisionsReadTests:
    def test_the_finished_requests_and_their_outcomes_are_one_read(self, ci_bot: Any, alice: Any) -> None:
        """What a socket owes after a submit, a resume or a re-check: pending ones are not finished."""
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from relay.consumers.agent import _finished

        def ask(command: str) -> PermissionRequest:
            result = services.request_submit(agent=ci_bot.agent, call=ask_call(command, tool_use_id=command))
            assert result.decision is None
            return result.request

        allowed, cancelled, waiting = ask("rm -rf a"), ask("rm -rf b"), ask("rm -rf c")
        services.request_decide(allowed.pk, services.Answer(behavior="allow", surface="web", user=alice))
        services.request_cancel(request=cancelled)
        with CaptureQueriesContext(connection) as captured:
            owed = _finished([allowed.pk, cancelled.pk, waiting.pk])
        assert len(captured.captured_queries) == 1, captured.captured_queries
        outcomes = {request.pk: decision for request, decision in owed}
        assert set(outcomes) == {allowed.pk, cancelled.pk}
        assert outcomes[allowed.pk] == Decision.objects.get(request=allowed, kind="decision")
        assert outcomes[allowed.pk].behavior == "allow" and outcomes[cancelled.pk].behavior == "deny"
