"""ntfy: each ask reaches the topic of every person who may decide it, and its buttons decide."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from rest_framework.test import APIClient

from tests.fakes.ntfy import FakeNtfy, fake_ntfy
from tests.relay.push.conftest import ask

pytestmark = pytest.mark.django_db(transaction=True)

NTFY_TOKEN = "tk_ntfytestaccesstoken0000000000"


@pytest.fixture
def ntfy(transactional_db: None) -> Iterator[tuple[FakeNtfy, Any]]:
    from approvals.extensions import registry
    from relay.push.ntfy import NtfyAnnouncer

    with fake_ntfy(token=NTFY_TOKEN) as fake:
        announcer = NtfyAnnouncer(fake.url, NTFY_TOKEN)
        registry.add_announcer(announcer)
        try:
            yield fake, announcer
        finally:
            registry.announcers.remove(announcer)
            announcer.queue.wait_idle(10)
            announcer.queue.stop()


def topic_of(user: Any) -> str:
    from relay.push import services

    return services.ntfy_topic_enable(user=user).topic


def tap(action: dict[str, Any]) -> Any:
    """What the ntfy app does for an `http` action: its method, URL, headers and body."""
    headers = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in action["headers"].items() if k != "Content-Type"}
    path = urlsplit(action["url"]).path
    return APIClient().generic(
        action["method"], path, action["body"], content_type=action["headers"]["Content-Type"], **headers
    )


class NtfyTests:
    def test_an_ask_is_published_to_the_persons_topic_with_buttons(self, ntfy, alice, ci_bot):
        fake, _ = ntfy
        topic = topic_of(alice)
        request = ask(ci_bot.agent, "npm test")
        [message] = fake.wait_for(lambda: fake.on_topic(topic))
        assert message["title"] == "ci-bot asks: Bash"
        assert "npm test" in message["message"]
        assert [a["label"] for a in message["actions"]] == ["Allow", "Deny", "Open"]
        assert message["click"].endswith(f"/requests/{request.pk}/")
        assert fake.refused == []

    def test_allow_from_the_app_decides_as_the_person_via_ntfy(self, ntfy, alice, ci_bot):
        from approvals.models import Decision

        fake, _ = ntfy
        topic = topic_of(alice)
        request = ask(ci_bot.agent, "npm test")
        [message] = fake.wait_for(lambda: fake.on_topic(topic))
        allow = message["actions"][0]
        assert json.loads(allow["body"]) == {"behavior": "allow"}
        response = tap(allow)
        assert response.status_code == 200, response.content
        decision = Decision.objects.get(request=request)
        assert (decision.behavior, decision.surface, decision.decided_by_user_id) == ("allow", "ntfy", alice.pk)
        assert tap(allow).status_code == 410  # one use
        assert tap(message["actions"][1]).status_code == 409  # Deny after Allow: someone was first

    def test_a_destructive_or_secret_ask_offers_no_allow_and_masks(self, ntfy, alice, ci_bot):
        fake, _ = ntfy
        topic = topic_of(alice)
        ask(ci_bot.agent, "rm -rf build")
        ask(ci_bot.agent, "curl -u deploy:Tr0ub4dor https://ci.example.com")
        messages = fake.wait_for(lambda: len(fake.on_topic(topic)) == 2 and fake.on_topic(topic))
        for message in messages:
            assert [a["label"] for a in message["actions"]] == ["Deny", "Open"]
            assert "Tr0ub4dor" not in json.dumps(message)

    def test_only_people_who_may_decide_get_it(self, ntfy, alice, bob, mallory, ci_bot):
        fake, announcer = ntfy
        alices, bobs, mallorys = topic_of(alice), topic_of(bob), topic_of(mallory)
        ask(ci_bot.agent)
        fake.wait_for(lambda: fake.on_topic(alices))
        assert announcer.queue.wait_idle(10)
        assert fake.on_topic(bobs) == [] and fake.on_topic(mallorys) == []

    def test_an_ask_of_a_team_nobody_follows_costs_one_read(self, ntfy, bob, mallory, ci_bot):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        fake, announcer = ntfy
        topic_of(bob), topic_of(mallory)  # a viewer and another team's approver: not told
        request = ask(ci_bot.agent)
        assert announcer.queue.wait_idle(10)
        with CaptureQueriesContext(connection) as captured:
            announcer._fan_out(request.pk, request.team_id)  # the job the ask queued, run again in view
        assert len(captured.captured_queries) == 1, captured.captured_queries
        assert announcer.queue.wait_idle(10)
        assert fake.messages == []

    def test_a_team_admin_gets_it_and_a_reminder_publishes_it_again(self, ntfy, carol, ci_bot):
        from django.utils import timezone

        from approvals import services
        from approvals.models import AuditKind, PermissionRequest

        fake, _ = ntfy
        topic = topic_of(carol)  # an admin: admins decide their team's asks too
        request = ask(ci_bot.agent, "npm test")
        fake.wait_for(lambda: fake.on_topic(topic))
        PermissionRequest.objects.filter(pk=request.pk).update(remind_at=timezone.now())
        request.refresh_from_db()
        assert services.request_ladder_step(request=request, kind=AuditKind.REMINDER) is not None
        again = fake.wait_for(lambda: fake.on_topic(topic)[1:])[0]
        assert again["title"] == "Still waiting: ci-bot asks: Bash"
        assert [a["label"] for a in again["actions"]] == ["Allow", "Deny", "Open"]

    def test_topics_are_unguessable_and_per_person(self, db, alice, bob):
        first, second = topic_of(alice), topic_of(bob)
        assert first != second and len(first) >= 32 and topic_of(alice) == first


class NtfyPageTests:
    def test_a_person_turns_ntfy_on_and_off_on_the_notifications_page(self, client, settings, alice):
        from relay.models import NtfyTopic

        settings.GATEHOUSE_NTFY_URL = "https://ntfy.example.com"
        client.force_login(alice)
        assert client.post("/notifications/", {"action": "ntfy-on"}).status_code == 302
        topic = NtfyTopic.objects.get(user=alice).topic
        page = client.get("/notifications/").content.decode()
        assert f"https://ntfy.example.com/{topic}" in page
        client.post("/notifications/", {"action": "ntfy-off"})
        assert not NtfyTopic.objects.filter(user=alice).exists()

    def test_without_an_ntfy_server_the_page_offers_none(self, client, settings, alice):
        from relay.models import NtfyTopic

        settings.GATEHOUSE_NTFY_URL = ""
        client.force_login(alice)
        client.post("/notifications/", {"action": "ntfy-on"})
        assert not NtfyTopic.objects.exists()
        assert 'id="ntfy"' not in client.get("/notifications/").content.decode()
