"""Quorum votes race like decisions: concurrent presses count each person once, whatever carries them.

Each round, four approvers press Allow on one ask that needs three of them, all at once:
each person through both server processes over HTTP, and two of them once more through
a chat surface in this process (`relay.race.answer`), all on the run's real Redis (the
claim store) and the real database. The check is the model: exactly three votes from
three distinct people, one allow naming them, exactly three presses told they counted,
every other press told why not (already approved, 400; already decided, 409), and the
hash chain intact.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

import httpx
import pytest

from approvals import services
from approvals.audit import verify_chain
from approvals.models import AuditKind, Decision
from relay import race
from tests.conftest import _person
from tests.live import LiveServer, live_server

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 3
REQUIRED = 3


def press_over_http(server: LiveServer, token: str, request_id: str) -> str:
    response = httpx.post(
        f"{server.url}/api/v1/permission-requests/{request_id}/decision",
        json={"behavior": "allow"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    return {200: "counted"}.get(response.status_code, str(response.status_code))


def press_in_chat(user: Any, surface: str, request_id: str) -> str:
    try:
        result = race.answer(request_id, services.Answer(behavior="allow", surface=surface, user=user))
    except services.ServiceError:
        return "400"
    return "counted" if result.won else "409"


def press_all_at_once(presses: list[Any]) -> list[str]:
    outcomes: list[str] = []
    barrier = threading.Barrier(len(presses))

    def run(press: Any) -> None:
        barrier.wait()
        outcomes.append(press())

    threads = [threading.Thread(target=run, args=(press,)) for press in presses]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcomes


def one_round(agent: Any, people: list[Any], tokens: dict[int, str], servers: tuple[LiveServer, ...], n: int) -> None:
    call = {"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "tool_use_id": f"q{n}"}
    request = services.request_submit(agent=agent, call=call).request
    request_id = str(request.pk)
    outcomes = press_all_at_once(
        [
            *(partial(press_over_http, s, tokens[p.pk], request_id) for p in people for s in servers),
            partial(press_in_chat, people[0], "telegram", request_id),
            partial(press_in_chat, people[1], "slack", request_id),
        ]
    )
    votes = list(Decision.objects.filter(request=request, kind=AuditKind.VOTE).order_by("id"))
    outcome = Decision.objects.get(request=request, kind=AuditKind.DECISION)
    assert len(votes) == REQUIRED
    assert len({v.decided_by_user_id for v in votes}) == REQUIRED
    assert outcome.behavior == "allow"
    assert outcome.reason["approvers"] == [v.decided_by for v in votes]
    assert outcomes.count("counted") == REQUIRED, outcomes
    assert set(outcomes) <= {"counted", "400", "409"}, outcomes


class QuorumRaceTests:
    def test_concurrent_presses_from_two_processes_and_chat_count_each_person_once(
        self, ci_bot: Any, alice: Any, default_team: Any
    ) -> None:
        people = [alice] + [_person(name, default_team, "approver") for name in ("carol", "dave", "erin")]
        tokens = {p.pk: services.personal_token_create(user=p) for p in people}
        services.rule_create(
            rule="Bash(rm:*)", behavior="ask", source="localSettings", team=default_team, approvals_required=REQUIRED
        )
        with live_server() as one, live_server() as two:
            for n in range(ROUNDS):
                one_round(ci_bot.agent, people, tokens, (one, two), n)
        assert list(verify_chain()) == []
