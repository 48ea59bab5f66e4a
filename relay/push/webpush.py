"""Web Push: each ask a person may decide is pushed to their browsers, encrypted and signed.

pywebpush encrypts the payload for the browser (RFC 8291, `aes128gcm`) and signs a VAPID
JWT (RFC 8292) with the server's key. An announcer, like the chat bridges: it only
enqueues after commit; one sender thread makes the calls, so a slow push service never
holds the request path. A push service answering 404 or 410 has dropped the
subscription, and so do we; 429 and 5xx are retried with backoff.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from functools import partial
from typing import Any

import requests
from django.utils import timezone
from pywebpush import WebPushException, webpush

from approvals import selectors as approval_selectors
from approvals.models import Decision, PermissionRequest, RequestState
from relay.bridges.base import Job, RetryLater, SendQueue, Transient
from relay.models import PushSubscription
from relay.push import notify, selectors, services, vapid
from relay.push.endpoints import EndpointRefused, check_endpoint

log = logging.getLogger(__name__)

CHANNEL = "webpush"
TIMEOUT_SECONDS = 10


class NoRedirects(requests.Session):
    """A push service answers; it never redirects. Following one would defeat the allow-list."""

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs["allow_redirects"] = False
        return super().request(*args, **kwargs)


class WebPushAnnouncer:
    name = "webpush"
    # Only asks were pushed: a call decided at submit has no notification to clear.
    asks_only = True

    def __init__(self) -> None:
        # One call per push service host at a time is plenty; no per-key pause needed.
        self.queue = SendQueue("webpush", per_key_interval=0.0, global_rate=100.0)
        self.session = NoRedirects()
        self.session.trust_env = False  # never through a proxy the environment names

    def request_created(self, request: PermissionRequest) -> None:
        self.queue.put(Job("", partial(self._fan_out, request.pk, request.team_id), f"push {request.pk}"))

    def request_finished(self, request: PermissionRequest, decision: Decision) -> None:
        self.queue.put(Job("", partial(self._tell_finished, request.pk), f"push finished {request.pk}"))

    def request_updated(self, request: PermissionRequest, row: Decision) -> None:
        """A ladder step (reminder, escalation) pushes the ask again to everyone who has not approved it."""
        if row.kind in notify.LADDER_STEPS:
            self.queue.put(
                Job("", partial(self._fan_out, request.pk, request.team_id, again=True), f"push again {request.pk}")
            )

    # jobs (sender thread) -------------------------------------------------------------------

    def _fan_out(self, request_id: uuid.UUID, team_id: int, *, again: bool = False) -> None:
        # Most teams have no one to tell: one read finds that out, and ends the job.
        recipients = selectors.subscriptions_for(team_id)
        if not recipients:
            return
        request = approval_selectors.request_get(request_id)
        if request is None or request.state != RequestState.PENDING:
            return
        notice = notify.notice_for(request)
        actions = ["allow", "deny"] if notice.offers_allow else ["deny"]
        approved = selectors.voters_of(request_id) if again else set()
        if again:
            notice = notify.again(notice)
        for subscription in recipients:
            if subscription.user_id in approved:
                continue
            tokens = services.action_tokens_issue(
                request=request, user=subscription.user, channel=CHANNEL, actions=actions, subscription=subscription
            )
            expires = services.token_expiry(request)
            payload = notify.ask_payload(notice, tokens, expires.isoformat())
            self.queue.put(
                Job(
                    _host(subscription.endpoint),
                    partial(self._send, subscription.pk, payload, expires),
                    f"push {request_id} to {subscription.pk}",
                )
            )

    def _tell_finished(self, request_id: uuid.UUID) -> None:
        # Most asks were pushed to nobody: one read finds that out, and ends the job.
        notified = selectors.subscriptions_notified(request_id)
        if not notified:
            return
        request = approval_selectors.request_get(request_id)
        decision = approval_selectors.decision_for(request) if request is not None else None
        if request is None or decision is None:
            return
        payload = notify.finished_payload(request, decision)
        for subscription in notified:
            self.queue.put(
                Job(
                    _host(subscription.endpoint),
                    partial(self._send, subscription.pk, payload, None),
                    f"push finished {request_id} to {subscription.pk}",
                )
            )

    def _send(self, subscription_id: int, payload: dict[str, Any], expires: datetime | None) -> None:
        subscription = PushSubscription.objects.filter(pk=subscription_id).first()
        if subscription is None:
            return  # removed since
        send(subscription, payload, expires=expires, session=self.session)


def send(
    subscription: PushSubscription,
    payload: dict[str, Any],
    *,
    expires: datetime | None = None,
    session: requests.Session | None = None,
) -> int:
    """Encrypt, sign and post one push; returns the push service's status.

    - Raises `RetryLater` (429) or `Transient` (5xx, network) for the send queue to retry.
    - 404/410 removes the subscription; other refusals are logged and dropped.
    """
    try:
        endpoint = check_endpoint(subscription.endpoint)  # again: the allow-list may have changed
    except EndpointRefused as exc:
        log.warning("push to subscription %s refused: %s", subscription.pk, exc)
        return 0
    ttl = max(0, int((expires - timezone.now()).total_seconds())) if expires is not None else 3600
    info = {"endpoint": endpoint, "keys": {"p256dh": subscription.p256dh, "auth": subscription.auth}}
    try:
        response = webpush(
            info,
            data=json.dumps(payload, ensure_ascii=False),
            vapid_private_key=vapid.vapid(),
            vapid_claims={"sub": vapid.subject()},
            content_encoding="aes128gcm",
            ttl=ttl,
            headers={"Urgency": "high"},
            timeout=TIMEOUT_SECONDS,
            requests_session=session or NoRedirects(),
        )
    except WebPushException as exc:
        return _refused(subscription, exc)
    except requests.RequestException as exc:
        raise Transient(str(exc)) from exc
    services.subscription_sent(subscription.pk)
    return int(getattr(response, "status_code", 201))


def _refused(subscription: PushSubscription, exc: WebPushException) -> int:
    status = exc.response.status_code if exc.response is not None else 0
    if status in (404, 410):
        log.info("push service dropped subscription %s (%s): removed", subscription.pk, status)
        services.subscription_forget(subscription.pk)
        return status
    if status == 429:
        retry = exc.response.headers.get("Retry-After", "5") if exc.response is not None else "5"
        raise RetryLater(float(retry) if retry.isdigit() else 5.0)
    if status >= 500 or status == 0:
        raise Transient(f"push service answered {status}")
    log.warning("push to subscription %s refused with %s: %s", subscription.pk, status, exc)
    return status


def _host(endpoint: str) -> str:
    return endpoint.split("://", 1)[-1].split("/", 1)[0]


_announcer: WebPushAnnouncer | None = None


def get_announcer() -> WebPushAnnouncer:
    """The process's Web Push announcer."""
    global _announcer
    if _announcer is None:
        _announcer = WebPushAnnouncer()
    return _announcer
