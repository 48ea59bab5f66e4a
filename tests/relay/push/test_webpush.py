"""Web Push: every ask a person may decide reaches their browsers, signed, encrypted, with one-time buttons."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.relay.push.conftest import ask, subscribe, token_of

pytestmark = pytest.mark.django_db(transaction=True)


def press(token: str, body: dict | None = None) -> Any:
    return APIClient().post(f"/api/v1/push-actions/{token}", body or {}, format="json")


class SubscribeTests:
    def test_it_keeps_a_browsers_subscription_for_the_person(self, push_service, push_settings, alice):
        from relay.models import PushSubscription

        subscription, sub_id = subscribe(alice, push_service)
        row = PushSubscription.objects.get(pk=sub_id)
        assert (row.user, row.endpoint) == (alice, subscription["endpoint"])

    def test_it_refuses_agents_and_strangers(self, push_service, push_settings, ci_bot):
        body = push_service.subscribe()
        agent = APIClient().post(
            "/api/v1/push-subscriptions", body, format="json", HTTP_AUTHORIZATION=f"Bearer {ci_bot.token}"
        )
        nobody = APIClient().post("/api/v1/push-subscriptions", body, format="json")
        assert agent.status_code == 403
        assert nobody.status_code in (401, 403)

    @pytest.mark.parametrize(
        "change",
        [
            {"keys": {"p256dh": "AAAA", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}},
            {"keys": {"p256dh": None, "auth": "x"}},
            {"keys": "nope"},
            {"endpoint": "https://evil.example/push/1"},
            {"extra": 1},
        ],
        ids=["short-key", "null-key", "keys-not-object", "foreign-host", "unknown-field"],
    )
    def test_it_answers_400_for_a_bad_subscription(self, push_service, push_settings, alice, change):
        client = APIClient()
        client.force_login(alice)
        body = {**push_service.subscribe(), **change}
        response = client.post("/api/v1/push-subscriptions", body, format="json")
        assert response.status_code == 400, response.content

    def test_a_person_deletes_only_their_own(self, push_service, push_settings, alice, bob):
        _, sub_id = subscribe(alice, push_service)
        as_bob, as_alice = APIClient(), APIClient()
        as_bob.force_login(bob)
        as_alice.force_login(alice)
        assert as_bob.delete(f"/api/v1/push-subscriptions/{sub_id}").status_code == 404
        assert as_alice.delete(f"/api/v1/push-subscriptions/{sub_id}").status_code == 204

    def test_the_vapid_key_is_public(self, db):
        key = APIClient().get("/api/v1/push/vapid-public-key").json()["public_key"]
        assert len(key) == 87  # a 65-byte uncompressed P-256 point in base64url


class DeliveryTests:
    def test_an_ask_is_pushed_signed_and_encrypted_with_allow_and_deny(self, push_service, announcer, alice, ci_bot):
        subscription, _ = subscribe(alice, push_service)
        request = ask(ci_bot.agent, "npm test")
        delivered = push_service.wait_for(lambda: push_service.for_sub(subscription))[0]
        payload = delivered.payload
        assert payload["request_id"] == str(request.pk)
        assert payload["tool_name"] == "Bash"
        assert payload["summary"] == "Bash: npm test" and "\n" not in payload["summary"]
        assert [a["action"] for a in payload["actions"]] == ["allow", "deny"]
        # Signed with the key browsers subscribe with, and never living past the ask.
        assert delivered.vapid_key == APIClient().get("/api/v1/push/vapid-public-key").json()["public_key"]
        assert 0 < int(delivered.headers["ttl"]) <= 300

    @pytest.mark.parametrize(
        ("command", "why"),
        [
            ("rm -rf build", "destructive"),
            ("printf " + "x" * 400, "too long"),
            ("printf '%s\\n' " + " ".join(f"line{n}" for n in range(3)) + "\n" * 8 + "echo end", "too many lines"),
            ("curl -H 'Authorization: Bearer abcdefghijklmnop1234' https://api.example.com", "secret masked"),
            ("git status\u200b", "hidden character"),
        ],
    )
    def test_allow_is_offered_only_when_the_whole_input_is_shown_and_safe(
        self, push_service, announcer, alice, ci_bot, command, why
    ):
        subscription, _ = subscribe(alice, push_service)
        ask(ci_bot.agent, command)
        delivered = push_service.wait_for(lambda: push_service.for_sub(subscription))[0]
        assert [a["action"] for a in delivered.payload["actions"]] == ["deny"], why
        assert "abcdefghijklmnop1234" not in str(delivered.payload)

    def test_only_people_who_may_decide_are_pushed(self, push_service, announcer, alice, bob, mallory, ci_bot):
        alices, _ = subscribe(alice, push_service)
        bobs, _ = subscribe(bob, push_service)  # a viewer
        mallorys, _ = subscribe(mallory, push_service)  # another team
        ask(ci_bot.agent)
        push_service.wait_for(lambda: push_service.for_sub(alices))
        assert announcer.queue.wait_idle(10)
        assert push_service.for_sub(bobs) == [] and push_service.for_sub(mallorys) == []

    def test_a_team_admin_is_pushed_too(self, push_service, announcer, carol, ci_bot):
        """Admins decide their team's asks (approvals/permissions.py), so their phones hear them."""
        carols, _ = subscribe(carol, push_service)
        request = ask(ci_bot.agent)
        delivered = push_service.wait_for(lambda: push_service.for_sub(carols))[0]
        assert delivered.payload["request_id"] == str(request.pk)

    def test_a_ladder_step_pushes_the_ask_again_to_those_who_have_not_approved(
        self, push_service, announcer, alice, ci_bot
    ):
        from django.utils import timezone

        from approvals import services
        from approvals.models import AuditKind, PermissionRequest
        from tests.conftest import _person

        dave = _person("dave", ci_bot.agent.team, "approver")

        services.rule_create(
            rule="Bash(npm publish:*)",
            behavior="ask",
            source="localSettings",
            team=ci_bot.agent.team,
            approvals_required=2,
        )
        alices, _ = subscribe(alice, push_service)
        daves, _ = subscribe(dave, push_service)
        request = ask(ci_bot.agent, "npm publish")
        push_service.wait_for(lambda: push_service.for_sub(alices))
        push_service.wait_for(lambda: push_service.for_sub(daves))
        services.request_decide(request.pk, services.Answer(behavior="allow", surface="web", user=alice))
        PermissionRequest.objects.filter(pk=request.pk).update(remind_at=timezone.now())
        request.refresh_from_db()
        assert services.request_ladder_step(request=request, kind=AuditKind.REMINDER) is not None
        again = push_service.wait_for(lambda: push_service.for_sub(daves)[1:])[0]
        assert again.payload["type"] == "ask" and again.payload["request_id"] == str(request.pk)
        assert again.payload["title"] == "Still waiting: ci-bot asks: Bash"
        assert [a["action"] for a in again.payload["actions"]] == ["allow", "deny"]
        assert announcer.queue.wait_idle(15)
        assert len(push_service.for_sub(alices)) == 1  # alice approved: not asked again

    def test_a_gone_subscription_is_removed(self, push_service, announcer, alice, ci_bot):
        from relay.models import PushSubscription

        for status in (404, 410):
            subscription, sub_id = subscribe(alice, push_service)
            push_service.answer_with[subscription["endpoint"].rsplit("/", 1)[1]] = status
            ask(ci_bot.agent, f"npm run gone-{status}")
            assert announcer.queue.wait_idle(15)
            assert not PushSubscription.objects.filter(pk=sub_id).exists(), status

    def test_the_notification_is_replaced_when_the_ask_is_over(self, push_service, announcer, alice, ci_bot):
        from approvals import services

        subscription, _ = subscribe(alice, push_service)
        request = ask(ci_bot.agent, "npm run lint")
        push_service.wait_for(lambda: push_service.for_sub(subscription))
        services.request_decide(request.pk, services.Answer(behavior="deny", surface="web", user=alice))
        finished = push_service.wait_for(lambda: push_service.for_sub(subscription)[1:])[0]
        assert finished.payload["type"] == "finished"
        assert finished.payload["request_id"] == str(request.pk)
        assert "Denied by alice via web" in finished.payload["summary"]

    def test_an_ask_pushed_to_nobody_costs_one_read_at_each_end(self, push_service, announcer, alice, ci_bot):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from approvals import services

        request = ask(ci_bot.agent, "npm run lint")
        assert announcer.queue.wait_idle(15)
        # The jobs the ask and its decision queued, run again in view.
        with CaptureQueriesContext(connection) as asked:
            announcer._fan_out(request.pk, request.team_id)
        services.request_decide(request.pk, services.Answer(behavior="deny", surface="web", user=alice))
        assert announcer.queue.wait_idle(15)
        with CaptureQueriesContext(connection) as ended:
            announcer._tell_finished(request.pk)
        assert len(asked.captured_queries) == 1, asked.captured_queries
        assert len(ended.captured_queries) == 1, ended.captured_queries
        assert announcer.queue.wait_idle(15)
        assert not [d for d in push_service.delivered if d.payload.get("request_id") == str(request.pk)]


class ActionTests:
    def _delivered(self, push_service, alice, ci_bot, command="npm test"):
        subscription, _ = subscribe(alice, push_service)
        request = ask(ci_bot.agent, command)
        return request, push_service.wait_for(lambda: push_service.for_sub(subscription))[0]

    def test_allow_decides_as_the_person_via_push_and_is_audited(self, push_service, announcer, alice, ci_bot):
        from approvals.models import Decision

        request, delivered = self._delivered(push_service, alice, ci_bot)
        response = press(token_of(delivered, "allow"), {"behavior": "allow"})
        assert response.status_code == 200, response.content
        decision = Decision.objects.get(request=request)
        assert (decision.behavior, decision.surface, decision.decided_by_user_id) == ("allow", "push", alice.pk)
        assert response.json()["decided_by"] == "alice"

    def test_a_token_works_once_and_its_sibling_is_told_who_was_first(self, push_service, announcer, alice, ci_bot):
        _, delivered = self._delivered(push_service, alice, ci_bot)
        assert press(token_of(delivered, "deny")).status_code == 200
        again = press(token_of(delivered, "deny"))
        late = press(token_of(delivered, "allow"))
        assert again.status_code == 410 and again.json()["error"]["code"] == "spent"
        assert late.status_code == 409
        assert late.json()["error"]["decided_by"] == "alice"

    def test_a_behavior_that_is_not_the_tokens_is_a_400_and_spends_nothing(
        self, push_service, announcer, alice, ci_bot
    ):
        _, delivered = self._delivered(push_service, alice, ci_bot)
        assert press(token_of(delivered, "deny"), {"behavior": "allow"}).status_code == 400
        assert press(token_of(delivered, "deny"), {"behavior": "maybe"}).status_code == 400
        assert press(token_of(delivered, "deny"), {"behavior": "deny"}).status_code == 200

    def test_an_expired_ask_answers_410(self, push_service, announcer, alice, ci_bot):
        from datetime import timedelta

        from django.utils import timezone

        from relay.models import PushActionToken

        request, delivered = self._delivered(push_service, alice, ci_bot)
        PushActionToken.objects.filter(request=request).update(expires_at=timezone.now() - timedelta(seconds=1))
        response = press(token_of(delivered, "allow"))
        assert response.status_code == 410 and response.json()["error"]["code"] == "expired"

    def test_a_forged_token_is_404_and_a_removed_approver_is_403(self, push_service, announcer, alice, ci_bot):
        from approvals.models import Membership

        _, delivered = self._delivered(push_service, alice, ci_bot)
        assert press("x" * 32).status_code == 404
        Membership.objects.filter(user=alice).update(role="viewer")
        assert press(token_of(delivered, "deny")).status_code == 403

    def test_concurrent_presses_of_one_token_decide_once(self, push_service, announcer, alice, ci_bot):
        from approvals.models import Decision

        request, delivered = self._delivered(push_service, alice, ci_bot)
        token = token_of(delivered, "deny")
        statuses: list[int] = []
        barrier = threading.Barrier(4)

        def run() -> None:
            from django.db import connection

            barrier.wait()
            statuses.append(press(token).status_code)
            connection.close()

        threads = [threading.Thread(target=run) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(statuses) == [200, 410, 410, 410]
        assert Decision.objects.filter(request=request).count() == 1

    def test_allow_on_a_call_that_needs_two_approvals_counts_one_vote_and_says_so(
        self, push_service, announcer, alice, carol, ci_bot
    ):
        from approvals import services
        from approvals.models import Decision, RequestState

        services.rule_create(
            rule="Bash(npm publish:*)",
            behavior="ask",
            source="localSettings",
            team=ci_bot.agent.team,
            approvals_required=2,
        )
        request, delivered = self._delivered(push_service, alice, ci_bot, "npm publish")
        response = press(token_of(delivered, "allow"), {"behavior": "allow"})
        assert response.status_code == 200, response.content
        body = response.json()
        # Not "Allowed.": the call still waits for a second person.
        assert body["message"] == "Approved: 1 of 2 — alice approved. It needs more approvals."
        assert (body["behavior"], body["decided_by"]) == ("allow", None)
        assert body["quorum"]["approvers"] == ["alice"]
        request.refresh_from_db()
        assert request.state == RequestState.PENDING
        assert list(Decision.objects.filter(request=request).values_list("kind", "surface", "decided_by")) == [
            ("vote", "push", "alice")
        ]
        assert press(token_of(delivered, "allow")).status_code == 410  # the token is spent

        done = services.request_decide(request.pk, services.Answer(behavior="allow", surface="web", user=carol))
        assert done.decision is not None and done.decision.decided_by == "alice and carol"
