"""Web Push in real Chromium: the service worker shows a pushed ask, and its buttons decide.

A browser here cannot reach a real push service, so only the delivery step runs in the
browser: the server pushes to the fake push service (tests/fakes/webpush.py), which
checks the VAPID JWT and decrypts the payload as the browser would; that payload is
then delivered to the page's service worker through the DevTools protocol
(`ServiceWorker.deliverPushMessage`), as Chrome delivers a push it received. The buttons
are pressed by calling the function the worker's `notificationclick` handler calls,
with the notification the worker showed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.webpush import FakePushService, fake_push_service
from tests.live import LiveServer, live_server
from tests.relay.bridges.conftest import AgentCall

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def push_service() -> Iterator[FakePushService]:
    with fake_push_service() as fake:
        yield fake


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    # Replaces the browser suite's server: this one may push to the fake on 127.0.0.1.
    with (
        django_db_blocker.unblock(),
        live_server(DJANGO_ALLOW_ASYNC_UNSAFE="", GATEHOUSE_PUSH_SERVICES="127.0.0.1") as srv,
    ):
        yield srv


def subscribed(user: Any, push_service: FakePushService) -> dict[str, Any]:
    from relay.models import PushSubscription

    subscription = push_service.subscribe()
    keys = subscription["keys"]
    PushSubscription.objects.create(
        user=user, endpoint=subscription["endpoint"], p256dh=keys["p256dh"], auth=keys["auth"]
    )
    return subscription


def worker_registration(page: Any, server: LiveServer) -> tuple[Any, str]:
    """The page's service worker and its DevTools registration id, once it is active."""
    page.context.grant_permissions(["notifications"], origin=server.url)
    scope = page.evaluate("navigator.serviceWorker.ready.then((r) => r.scope)")
    assert scope == server.url + "/"
    cdp = page.context.new_cdp_session(page)
    registrations: list[dict[str, Any]] = []
    versions: list[dict[str, Any]] = []
    cdp.on("ServiceWorker.workerRegistrationUpdated", lambda event: registrations.extend(event["registrations"]))
    cdp.on("ServiceWorker.workerVersionUpdated", lambda event: versions.extend(event["versions"]))
    cdp.send("ServiceWorker.enable")
    deadline = time.monotonic() + 10

    def ready() -> str | None:
        ids = {r["registrationId"] for r in registrations if r["scopeURL"] == scope and not r["isDeleted"]}
        # A push reaches only an activated, running worker; one still starting drops it.
        running = [
            v
            for v in versions
            if v["registrationId"] in ids and v["status"] == "activated" and v["runningStatus"] == "running"
        ]
        return running[-1]["registrationId"] if running else None

    while (registration_id := ready()) is None:
        assert time.monotonic() < deadline, f"no running service worker reported: {versions}"
        page.wait_for_timeout(50)
    # The permission was granted after the page (and its worker) started: wait until the
    # worker sees it, or its showNotification would be refused and the push shown as nothing.
    while page.context.service_workers[0].evaluate("Notification.permission") != "granted":
        assert time.monotonic() < deadline, "the service worker never saw the notification permission"
        page.wait_for_timeout(50)
    return cdp, registration_id


# Headless Chromium has no notification centre: it may close a shown notification at any
# moment, and then `getNotifications()` no longer lists it. So the test records what the
# worker asked the browser to show, by wrapping `showNotification` in the live worker.
RECORD = """() => {
  self.shownForTest = [];
  const show = self.registration.showNotification.bind(self.registration);
  self.registration.showNotification = (title, options) => {
    self.shownForTest.push({title, body: options.body, tag: options.tag, data: options.data,
                            actions: (options.actions || []).map((a) => a.action)});
    return show(title, options);
  };
}"""
SHOWN = "(tag) => self.shownForTest.filter((n) => n.tag === tag)"


def shown(worker: Any, page: Any, tag: str, *, count: int = 1) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while len(found := worker.evaluate(SHOWN, tag)) < count:
        assert time.monotonic() < deadline, "the service worker showed no notification"
        page.wait_for_timeout(50)
    return list(found)


PRESS = """async ([tag, action]) => {
  const [notification] = self.shownForTest.filter((n) => n.tag === tag);
  return self.gatehouse.handleClick(notification, action);
}"""


class PushNotificationTests:
    def test_a_pushed_ask_is_shown_with_buttons_and_allow_releases_the_agent(
        self, page_for: Any, server: LiveServer, push_service: FakePushService, alice: Any, ci_bot: Any
    ) -> None:
        subscription = subscribed(alice, push_service)
        agent = AgentCall(server.url, ci_bot.token, "npm test")
        delivered = push_service.wait_for(lambda: push_service.for_sub(subscription))[0]
        request_id = delivered.payload["request_id"]
        page = page_for(alice, "/notifications/")
        cdp, registration_id = worker_registration(page, server)
        worker = page.context.service_workers[0]
        worker.evaluate(RECORD)
        cdp.send(
            "ServiceWorker.deliverPushMessage",
            {"origin": server.url, "registrationId": registration_id, "data": json.dumps(delivered.payload)},
        )
        [notification] = shown(worker, page, request_id)
        assert notification["title"] == "ci-bot asks: Bash"
        assert notification["body"] == "npm test"
        assert notification["actions"][:2] == ["allow", "deny"]
        result = worker.evaluate(PRESS, [request_id, "allow"])
        assert result["status"] == 200, result
        answer = agent.result()
        assert answer.status_code == 200
        decision = answer.json()["decision"]
        assert (decision["behavior"], decision["reason"]["surface"]) == ("allow", "push")
        # The notification now says what happened.
        assert shown(worker, page, request_id, count=2)[1]["body"] == "Allowed."

    def test_a_destructive_ask_offers_deny_and_open_and_a_late_press_hears_who_was_first(
        self, page_for: Any, server: LiveServer, push_service: FakePushService, alice: Any, ci_bot: Any
    ) -> None:
        import httpx

        subscription = subscribed(alice, push_service)
        agent = AgentCall(server.url, ci_bot.token, "rm -rf build")
        delivered = push_service.wait_for(lambda: push_service.for_sub(subscription))[0]
        request_id = delivered.payload["request_id"]
        page = page_for(alice, "/notifications/")
        cdp, registration_id = worker_registration(page, server)
        worker = page.context.service_workers[0]
        worker.evaluate(RECORD)
        cdp.send(
            "ServiceWorker.deliverPushMessage",
            {"origin": server.url, "registrationId": registration_id, "data": json.dumps(delivered.payload)},
        )
        [notification] = shown(worker, page, request_id)
        assert notification["actions"] == ["deny", "open"]
        # Someone decides elsewhere first (a script with alice's token); the phone's Deny then names them.
        from approvals import services

        token = services.personal_token_create(user=alice)
        httpx.post(
            f"{server.url}/api/v1/permission-requests/{request_id}/decision",
            json={"behavior": "deny", "message": "not today"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        ).raise_for_status()
        assert agent.result().json()["decision"]["behavior"] == "deny"
        result = worker.evaluate(PRESS, [request_id, "deny"])
        assert result["status"] == 409
        assert "alice" in result["message"]
