"""Audit or refuse: with the audit store unwritable every call is denied, and it heals by itself.

Against a real Daphne, over all three doors an agent uses (HTTP submit, the agent
WebSocket, the Claude Code hook endpoint). The audit store is broken in the database
itself: a trigger that refuses inserts, or another session holding the lock.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest

from approvals import services
from approvals.models import Decision, PermissionRequest
from tests.live import LiveServer, live_server
from tests.reliability.clients import AUDIT_UNAVAILABLE, AgentSocket, Heard, call, hook_submit, http_submit
from tests.reliability.faults import audit_locked, audit_refuses_inserts

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FAULTS: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "insert_refused": audit_refuses_inserts,
    "table_locked": audit_locked,
}
ROUNDS = 6


@pytest.fixture(scope="module")
def audit_server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    # A 1 s lock timeout: a locked audit table must become a prompt deny, not a hang.
    with django_db_blocker.unblock(), live_server(DB_LOCK_TIMEOUT="1") as srv:
        yield srv


async def one_round(srv: LiveServer, token: str, socket: AgentSocket, client: httpx.AsyncClient, n: str) -> list[Heard]:
    """An allow-rule call, a deny-rule call through each door: what the agent heard."""
    counter = itertools.count()
    jobs = []
    for command in ("ls -la", "curl https://example.com"):
        jobs.append(http_submit(client, srv, token, call(command, f"h{n}-{next(counter)}-{command[:2]}")))
        jobs.append(hook_submit(client, srv, token, call(command, f"k{n}-{next(counter)}-{command[:2]}")))
        jobs.append(socket.submit(call(command, f"w{n}-{next(counter)}-{command[:2]}")))
    return list(await asyncio.gather(*jobs))


def run_rounds(srv: LiveServer, token: str, rounds: int, phase: str) -> list[Heard]:
    async def scenario() -> list[Heard]:
        socket = await AgentSocket.open(srv, token)
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                heard: list[Heard] = []
                for n in range(rounds):
                    heard.extend(await one_round(srv, token, socket, client, f"{phase}{n}"))
                return heard
        finally:
            await socket.close()

    return asyncio.run(scenario())


@pytest.mark.parametrize("fault", FAULTS)
class AuditOrRefuseTests:
    def test_it_denies_every_call_while_the_audit_store_is_broken_and_heals_after(
        self, fault: str, audit_server: LiveServer, ci_bot: Any, default_team: Any
    ) -> None:
        services.rule_create(rule="Bash(ls:*)", behavior="allow", source="projectSettings", team=default_team)
        services.rule_create(rule="Bash(curl:*)", behavior="deny", source="projectSettings", team=default_team)
        before = run_rounds(audit_server, ci_bot.token, 1, "before")
        assert sorted(h.behavior for h in before) == ["allow"] * 3 + ["deny"] * 3, before
        audited = Decision.objects.count()

        # An agent never seen before: its first call also records "last seen", another write.
        _, fresh_token = services.agent_create(name="fresh-bot", team=default_team)

        with FAULTS[fault]():
            during = run_rounds(audit_server, ci_bot.token, ROUNDS, "during")
            during += run_rounds(audit_server, fresh_token, 1, "fresh")

        assert len(during) == (ROUNDS + 1) * 6
        assert [h for h in during if h.behavior != "deny"] == [], "every call must be denied while broken"
        assert [h for h in during if AUDIT_UNAVAILABLE not in h.detail.lower()] == [], (
            "each deny names the audit store as the reason"
        )
        assert {h.status for h in during if h.channel == "http"} == {503}
        # Nothing was decided behind the agent's back: no audit row, no request left decided.
        assert Decision.objects.count() == audited
        assert PermissionRequest.objects.filter(decision__isnull=True).exclude(state="pending").count() == 0

        after = run_rounds(audit_server, ci_bot.token, 1, "after")
        assert sorted(h.behavior for h in after) == ["allow"] * 3 + ["deny"] * 3, after
        assert Decision.objects.count() == audited + 6
