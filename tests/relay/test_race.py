"""First responder wins: two browsers and an API client race for one ask."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import httpx
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import services
from approvals.models import Decision, PermissionRequest, RequestState
from relay import race
from relay.webhooks import PermissionRequestWebhooks, webhook_create
from tests.live import LiveServer
from tests.relay.fake_webhook import fake_webhook
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


def browser(srv: LiveServer, cookie: str) -> httpx.AsyncClient:
    """A logged-in browser tab: session cookie, CSRF cookie and header, same origin."""
    csrf = secrets.token_hex(16)
    return httpx.AsyncClient(
        base_url=srv.url,
        cookies={"sessionid": cookie, "csrftoken": csrf},
        headers={"X-CSRFToken": csrf, "Origin": srv.url, "Accept": "application/json"},
        timeout=20,
    )


class RaceTests:
    def test_exactly_one_of_two_browsers_and_an_api_client_wins(
        self, relay_server: LiveServer, ci_bot: Any, alice: Any, admin: Any
    ) -> None:
        alice_cookie, admin_cookie = session_cookie(alice), session_cookie(admin)
        api_token = services.personal_token_create(user=alice)

        async def scenario() -> dict[str, Any]:
            async with (
                agent_connect(relay_server, ci_bot.token) as agent,
                dashboard_connect(relay_server, alice_cookie) as board_a,
                dashboard_connect(relay_server, admin_cookie) as board_b,
                browser(relay_server, alice_cookie) as tab_a,
                browser(relay_server, admin_cookie) as tab_b,
                httpx.AsyncClient(
                    base_url=relay_server.url, timeout=20, headers={"Authorization": f"Bearer {api_token}"}
                ) as api,
            ):
                for board in (board_a, board_b):
                    await send(board, {"type": "subscribe"})
                    await receive_until(board, of_type("snapshot"))
                await send(agent, {"type": "permission_request", "ref": "r", "request": ask_call()})
                request_id = (await receive_until(agent, of_type("pending")))["id"]
                for board in (board_a, board_b):
                    await receive_until(board, of_type("request.created", id=request_id))
                responses = await asyncio.gather(
                    tab_a.post(f"/requests/{request_id}/decide", data={"action": "once"}),
                    tab_b.post(f"/requests/{request_id}/decide", data={"action": "deny", "message": "no"}),
                    api.post(f"/api/v1/permission-requests/{request_id}/decision", json={"behavior": "allow"}),
                )
                decision = await receive_until(agent, of_type("decision"))
                pushes = [await receive_until(b, of_type("request.decided", id=request_id)) for b in (board_a, board_b)]
                return {"id": request_id, "responses": responses, "decision": decision, "pushes": pushes}

        outcome = asyncio.run(scenario())
        statuses = sorted(r.status_code for r in outcome["responses"])
        assert statuses == [200, 409, 409], [r.text for r in outcome["responses"]]
        row = Decision.objects.get(request_id=outcome["id"])
        assert Decision.objects.filter(request_id=outcome["id"]).count() == 1
        assert outcome["decision"]["decision"]["behavior"] == row.behavior
        assert outcome["decision"]["decision"]["decided_by"] == row.decided_by
        for push in outcome["pushes"]:
            assert push["decided_by"] == row.decided_by and push["surface"] == row.surface
        for loser in (r for r in outcome["responses"] if r.status_code == 409):
            assert row.decided_by in loser.text

    def test_a_loser_hears_who_won_and_how(self, ci_bot: Any, alice: Any, admin: Any, transactional_db: None) -> None:
        request = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
        first = race.answer(request.pk, services.Answer(behavior="deny", surface="telegram", user=alice))
        second = race.answer(request.pk, services.Answer(behavior="allow", surface="web", user=admin))
        assert first.won and not second.won
        assert race.loser_message(second) == "already decided by alice via telegram (denied)"
        assert PermissionRequest.objects.get(pk=request.pk).state == "decided"

    def test_answers_after_an_expiry_lose_with_the_reason(self, ci_bot: Any, alice: Any) -> None:
        from django.test import override_settings

        from relay.sweeper import sweep_once

        with override_settings(GATEHOUSE_ASK_TIMEOUT=0):
            request = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
        # The module's live server sweeps the same database each second, so either
        # sweeper may be the one that expires it; what matters is that it is expired.
        sweep_once()
        request.refresh_from_db()
        assert request.state == RequestState.EXPIRED
        late = race.answer(request.pk, services.Answer(behavior="allow", surface="slack", user=alice))
        assert not late.won
        assert race.loser_message(late) == "already expired: nobody answered before the deadline"

    def test_concurrent_answers_in_one_process_make_one_decision(self, ci_bot: Any, alice: Any) -> None:
        import threading

        from django.db import connection

        request = services.request_submit(agent=ci_bot.agent, call=ask_call()).request
        barrier = threading.Barrier(8)
        results: list[bool] = []

        def decider(n: int) -> None:
            barrier.wait()
            try:
                results.append(
                    race.answer(
                        request.pk, services.Answer(behavior="allow" if n % 2 else "deny", surface="api", user=alice)
                    ).won
                )
            finally:
                connection.close()

        threads = [threading.Thread(target=decider, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(results) == [False] * 7 + [True]
        assert Decision.objects.filter(request=request).count() == 1


class CoordinatorQueueTests:
    def test_coordinator_asks_hooks_then_the_classifier_one_after_another(self, ci_bot: Any, default_team: Any) -> None:
        import json
        import time

        from relay.classifiers import ClassifierRacer, LLMClassifier
        from relay.race import Race
        from relay.webhooks import PermissionRequestWebhooks, webhook_create
        from tests.fakes.anthropic import fake_anthropic
        from tests.relay.fake_webhook import fake_webhook

        order: list[tuple[str, float]] = []

        def hook_answer(body: dict[str, Any]) -> tuple[int, dict[str, Any] | None, float]:
            order.append(("hook", time.monotonic()))
            return 200, None, 0.3  # slow, and no opinion

        def model_answer(body: dict[str, Any]) -> str:
            order.append(("classifier", time.monotonic()))
            return json.dumps({"decision": "allow", "reason": "build output only"})

        request = services.request_submit(agent=ci_bot.agent, call=ask_call(context="coordinator")).request
        with fake_webhook(hook_answer) as hook, fake_anthropic(model_answer) as api:
            webhook_create(
                team=default_team,
                name="policy",
                url=hook.url,
                event="PermissionRequest",
                secret="webhook-secret-0123456789",
            )
            queue = Race(
                [ClassifierRacer(LLMClassifier(api_key="sk-test", base_url=api.url)), PermissionRequestWebhooks()]
            )
            queue.queue(request)
        first = {name: when for name, when in reversed(order)}
        # One after another: the classifier was asked only after the slow hook answered.
        assert first["classifier"] - first["hook"] >= 0.3
        request.refresh_from_db()
        assert request.state == "decided"
        assert request.decision is not None and request.decision.decided_by == "classifier llm"


HOOK_WAIT = 10.0


class RacerReadsTests:
    """A racer reads the request's state once it has something to ask, and only then."""

    @staticmethod
    def add_hook(team: Any, name: str, hook_url: str) -> None:
        webhook_create(
            team=team, name=name, url=hook_url, event="PermissionRequest", secret="webhook-secret-0123456789"
        )

    def test_a_team_without_permission_request_webhooks_costs_one_read(self, ci_bot: Any) -> None:
        racer = PermissionRequestWebhooks()
        request = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="t-reads")).request
        with CaptureQueriesContext(connection) as queries:
            finished = race.Race([racer]).ask_one(request, racer)
        # The team's webhooks of the event; not the request's state: nobody is asked.
        assert len(queries) == 1 and "relay_webhook" in queries[0]["sql"], [q["sql"][:80] for q in queries]
        assert finished is False

    def test_a_finished_request_is_offered_to_no_webhook(self, ci_bot: Any, alice: Any, default_team: Any) -> None:
        racer = PermissionRequestWebhooks()
        request = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="t-done")).request
        services.request_decide(request.pk, services.Answer(behavior="deny", surface="web", user=alice))
        with fake_webhook(lambda body: (200, None, 0)) as hook:
            self.add_hook(default_team, "late", hook.url)
            finished = race.Race([racer]).ask_one(request, racer)
            assert hook.calls == []
        assert finished is True

    def test_a_pending_request_is_offered_after_one_read_of_its_state(self, ci_bot: Any, default_team: Any) -> None:
        racer = PermissionRequestWebhooks()
        with fake_webhook(lambda body: (200, None, 0)) as hook:
            self.add_hook(default_team, "open", hook.url)
            request = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="t-open")).request
            # The server's own race asks the hook once, on a thread of its own, as the ask
            # commits: that call first, so that the next one is this racer's.
            assert hook.called.wait(HOOK_WAIT)
            before = len(hook.calls)
            with CaptureQueriesContext(connection) as queries:
                finished = race.Race([racer]).ask_one(request, racer)
            assert (before, len(hook.calls)) == (1, 2)
        states = [q for q in queries if "approvals_permissionrequest" in q["sql"]]
        assert len(states) == 1, [q["sql"][:80] for q in queries]
        assert finished is False  # the hook had no opinion; people still decide


def _raced(request: PermissionRequest, racer: race.Racer | None = None) -> bool:
    """Whether announcing `request` set off a job for `racer` (the webhooks' by default),
    every job done first; the job records the request instead of asking anyone."""
    judge = racer or PermissionRequestWebhooks()
    asked: list[Any] = []

    class Recording:
        name = judge.name
        may_answer = staticmethod(judge.may_answer)

        def offers(self, request: PermissionRequest, still_pending: Any) -> list[services.Answer]:
            asked.append(request.pk)
            return []

    announced = race.Race([Recording()])
    announced.request_created(request)
    announced.pool.shutdown(wait=True)
    return asked == [request.pk]


# The team's webhooks when an ask is submitted, and whether the race must ask them.
WEBHOOK_SETS: dict[str, tuple[list[tuple[str, bool]], bool]] = {
    "none": ([], False),
    "a PreToolUse webhook only": ([("PreToolUse", True)], False),
    "a disabled PermissionRequest webhook": ([("PermissionRequest", False)], False),
    "a PermissionRequest webhook": ([("PermissionRequest", True)], True),
    "both events": ([("PreToolUse", True), ("PermissionRequest", True)], True),
    "one enabled and one disabled PermissionRequest webhook": (
        [("PermissionRequest", False), ("PermissionRequest", True)],
        True,
    ),
}


class RaceJobTests:
    """An ask sets off a racer's job only when the racer may have something to ask."""

    @pytest.mark.parametrize("hooks", list(WEBHOOK_SETS))
    def test_the_webhooks_are_raced_exactly_when_the_team_has_an_enabled_permission_request_one(
        self, ci_bot: Any, default_team: Any, hooks: str
    ) -> None:
        configured, expected = WEBHOOK_SETS[hooks]
        for n, (event, enabled) in enumerate(configured):
            hook = webhook_create(
                team=default_team, name=f"h{n}", url="http://127.0.0.1:9/", event=event, secret="s" * 16
            )
            if not enabled:
                hook.enabled = False
                hook.save()
        request = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id=f"t-{hooks}")).request
        assert request.state == RequestState.PENDING
        assert _raced(request) is expected

    def test_a_webhook_added_after_an_ask_is_raced_from_the_next_ask(self, ci_bot: Any, default_team: Any) -> None:
        first = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="t-before")).request
        assert _raced(first) is False
        webhook_create(
            team=default_team, name="new", url="http://127.0.0.1:9/", event="PermissionRequest", secret="s" * 16
        )
        second = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="t-after")).request
        assert _raced(second) is True

    def test_an_ask_of_another_version_than_the_one_kept_is_raced(self, ci_bot: Any, default_team: Any) -> None:
        hook = webhook_create(
            team=default_team, name="gone", url="http://127.0.0.1:9/", event="PermissionRequest", secret="s" * 16
        )
        older = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="t-older")).request
        hook.delete()
        newer = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="t-newer")).request
        # What is kept now is the newer version's (no webhook): it says nothing of the older ask's.
        assert (_raced(newer), _raced(older)) == (False, True)

    def test_a_request_read_back_is_raced_whatever_this_process_kept(self, ci_bot: Any) -> None:
        # Nothing is known of the version it was submitted at: the job reads the webhooks.
        submitted = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="t-read")).request
        assert _raced(submitted) is False
        assert _raced(PermissionRequest.objects.get(pk=submitted.pk)) is True

    def test_an_ask_kept_for_a_person_sets_off_no_classifier(self, ci_bot: Any, default_team: Any) -> None:
        from relay.classifiers import ClassifierRacer, LLMClassifier

        services.rule_create(rule="Bash(rm:*)", behavior="ask", source="userSettings", team=default_team)
        reserved = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="t-reserved")).request
        open_ask = services.request_submit(
            agent=ci_bot.agent, call=ask_call("make deploy", tool_use_id="t-open")
        ).request
        racer = ClassifierRacer(LLMClassifier(api_key="sk-test", base_url="http://127.0.0.1:9"))
        assert (_raced(reserved, racer), _raced(open_ask, racer)) == (False, True)
