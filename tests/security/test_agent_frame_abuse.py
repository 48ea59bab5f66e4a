"""What an agent may say about its own requests: no result for a denied call, no progress
for a finished one, every ref answered, no echo of what it sent, no decision after the deadline.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from approvals import services
from approvals.models import Decision, PermissionRequest, RequestState
from tests.live import LiveServer
from tests.relay.wsclient import agent_connect, ask_call, in_thread, of_type, receive, receive_until, send

pytestmark = pytest.mark.django_db(transaction=True)

# How each finished request is reached, and whether a tool result / progress may follow.
OUTCOMES = {
    "pending": (False, True),
    "allowed": (True, True),
    "allowed_and_ran": (True, False),
    "denied": (False, False),
    "expired": (False, False),
    "cancelled": (True, False),
}


def request_in(outcome: str, ci_bot: Any, alice: Any, tag: str) -> str:
    request = services.request_submit(
        agent=ci_bot.agent, call={**ask_call(), "tool_use_id": f"{outcome}-{tag}"}
    ).request
    if outcome in ("allowed", "allowed_and_ran", "denied"):
        behavior = "deny" if outcome == "denied" else "allow"
        services.request_decide(request.pk, services.Answer(behavior=behavior, surface="web", user=alice))
    if outcome == "allowed_and_ran":
        services.request_record_result(request=PermissionRequest.objects.get(pk=request.pk), ok=True, output="done")
    if outcome == "expired":
        services.request_expire(request=PermissionRequest.objects.get(pk=request.pk))
    if outcome == "cancelled":
        services.request_cancel(request=PermissionRequest.objects.get(pk=request.pk), reason="answered locally")
    return str(request.pk)


async def answer_to(ws: Any, frame: dict[str, Any]) -> dict[str, Any] | None:
    """The error frame a frame gets, or None when it is taken silently (checked by a ping frame)."""
    await send(ws, frame)
    await send(ws, {"type": "no-such-frame", "ref": "ping"})
    first = await receive(ws)
    if first.get("ref") == "ping":
        return None
    await receive_until(ws, of_type("error", ref="ping"))
    return first


class ResultAndProgressTests:
    @pytest.mark.parametrize("outcome", list(OUTCOMES))
    def test_it_takes_results_and_progress_only_for_calls_that_may_run(
        self, security_server: LiveServer, ci_bot: Any, alice: Any, outcome: str
    ) -> None:
        result_ok, progress_ok = OUTCOMES[outcome]
        ids = [request_in(outcome, ci_bot, alice, str(i)) for i in range(2)]

        async def scenario() -> tuple[Any, Any]:
            async with agent_connect(security_server, ci_bot.token) as ws:
                progress = await answer_to(ws, {"type": "progress", "id": ids[0], "ref": "p", "data": {"text": "…"}})
                result = await answer_to(
                    ws, {"type": "tool_result", "id": ids[1], "ref": "t", "ok": True, "output": "x"}
                )
                return progress, result

        progress, result = asyncio.run(scenario())
        assert (progress is None) == progress_ok, progress
        assert (result is None) == result_ok, result
        stored = PermissionRequest.objects.get(pk=ids[1]).result
        if not result_ok and outcome != "allowed_and_ran":
            assert stored is None  # the page never shows a denied call as run
        if progress is not None:
            assert progress["code"] == "request_finished"
        if result is not None:
            assert result["code"] == "request_not_allowed"


class SameToolUseIdTests:
    @pytest.mark.parametrize("copies", [2, 3, 5])
    def test_it_answers_every_ref_that_sent_the_same_tool_use_id(
        self, security_server: LiveServer, ci_bot: Any, alice: Any, copies: int
    ) -> None:
        call = {**ask_call(), "tool_use_id": f"twice-{copies}"}

        async def scenario() -> dict[str, dict[str, Any]]:
            async with agent_connect(security_server, ci_bot.token) as ws:
                for n in range(copies):
                    await send(ws, {"type": "permission_request", "ref": f"r{n}", "request": call})
                pendings = [await receive_until(ws, lambda f: f.get("type") == "pending") for _ in range(copies)]
                assert len({p["id"] for p in pendings}) == 1
                await in_thread(
                    services.request_decide,
                    pendings[0]["id"],
                    services.Answer(behavior="allow", surface="web", user=alice),
                )
                decided: dict[str, dict[str, Any]] = {}
                while len(decided) < copies:
                    frame = await receive_until(ws, lambda f: f.get("type") == "decision")
                    decided[frame["ref"]] = frame
                return decided

        decided = asyncio.run(scenario())
        assert set(decided) == {f"r{n}" for n in range(copies)}
        assert {f["decision"]["behavior"] for f in decided.values()} == {"allow"}


class EchoCapTests:
    @pytest.mark.parametrize(
        "frame",
        [
            {"type": "x" * 60_000},
            {"type": "y" * 60_000, "id": "not-a-uuid"},
            {"type": "progress", "id": "z" * 60_000},
            {"type": "resume", "ids": ["w" * 100] * 500},
            {"type": "resume", "ids": [{"id": "v" * 60_000}]},
            {"type": "cancel", "id": ["u" * 60_000]},
        ],
    )
    def test_it_never_echoes_more_than_a_short_quote_of_a_frame(
        self, security_server: LiveServer, ci_bot: Any, frame: dict[str, Any]
    ) -> None:
        async def scenario() -> list[dict[str, Any]]:
            answers: list[dict[str, Any]] = []
            async with agent_connect(security_server, ci_bot.token) as ws:
                await send(ws, frame)
                await send(ws, {"type": "no-such-frame", "ref": "end"})
                while True:
                    answer = await receive(ws)
                    if answer.get("ref") == "end":
                        return answers
                    answers.append(answer)

        for answer in asyncio.run(scenario()):
            assert len(answer["message"]) < 400, answer["message"][:100]


class LateDecisionTests:
    @pytest.mark.parametrize("late_by", [timedelta(milliseconds=1), timedelta(seconds=1), timedelta(seconds=4)])
    @pytest.mark.parametrize("behavior", ["allow", "deny"])
    def test_it_refuses_a_decision_once_the_deadline_passed(
        self, ci_bot: Any, alice: Any, behavior: str, late_by: timedelta
    ) -> None:
        request = services.request_submit(agent=ci_bot.agent, call={**ask_call(), "tool_use_id": "late"}).request
        PermissionRequest.objects.filter(pk=request.pk).update(deadline_at=timezone.now() - late_by)
        result = services.request_decide(request.pk, services.Answer(behavior=behavior, surface="web", user=alice))
        assert result.won is False
        stored = PermissionRequest.objects.get(pk=request.pk)
        assert stored.state == RequestState.EXPIRED
        decision = Decision.objects.get(request_id=request.pk)
        assert decision.behavior == "deny" and decision.decided_by == "timeout"

    def test_it_still_takes_a_decision_just_before_the_deadline(self, ci_bot: Any, alice: Any) -> None:
        request = services.request_submit(agent=ci_bot.agent, call={**ask_call(), "tool_use_id": "in-time"}).request
        PermissionRequest.objects.filter(pk=request.pk).update(deadline_at=timezone.now() + timedelta(seconds=30))
        result = services.request_decide(request.pk, services.Answer(behavior="allow", surface="web", user=alice))
        assert result.won is True
        assert result.decision is not None and result.decision.behavior == "allow"
