"""ntfy: each ask is published to the topic of every person who may decide it, with buttons.

A self-hosted ntfy server (`GATEHOUSE_NTFY_URL`, optionally `GATEHOUSE_NTFY_TOKEN` for
its access control) gets ntfy's publish JSON (`POST /` with `topic`, `title`, `message`,
`actions`, …). Each person has their own unguessable topic (the profile page shows it).
The buttons are ntfy `http` actions that the ntfy app calls itself: a POST to
`/api/v1/push-actions/{token}` with the same one-time tokens Web Push uses, so the
decision goes through the same door. Sending runs on a sender thread after commit.
"""

from __future__ import annotations

import logging
import uuid
from functools import partial
from typing import Any

import httpx
from django.conf import settings

from approvals import selectors as approval_selectors
from approvals.models import Decision, PermissionRequest, RequestState
from relay.bridges.base import Job, RetryLater, SendQueue, Transient
from relay.models import NtfyTopic
from relay.push import notify, selectors, services

log = logging.getLogger(__name__)

CHANNEL = "ntfy"
TIMEOUT_SECONDS = 10


def publish_json(topic: str, notice: notify.Notice, tokens: dict[str, str]) -> dict[str, Any]:
    """ntfy's publish JSON for one ask: Allow (when offered), Deny, Open (ntfy allows three)."""
    action_url = f"{settings.PUBLIC_URL}/api/v1/push-actions/"
    actions: list[dict[str, Any]] = [
        {
            "action": "http",
            "label": action.capitalize(),
            "url": f"{action_url}{token}",
            "method": "POST",
            "headers": {"Content-Type": "application/json"},
            "body": f'{{"behavior": "{action}"}}',
            "clear": True,
        }
        for action, token in tokens.items()
    ]
    actions.append({"action": "view", "label": "Open", "url": notice.url, "clear": False})
    return {
        "topic": topic,
        "title": notice.title,
        "message": f"{notice.summary}\n{notice.body}" if notice.body != notice.summary else notice.summary,
        "tags": ["warning"] if notice.destructive else ["lock"],
        "priority": 4,
        "click": notice.url,
        "actions": actions,
    }


class NtfyAnnouncer:
    name = "ntfy"
    asks_only = True  # only asks were published

    def __init__(self, base_url: str, token: str = "") -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.queue = SendQueue("ntfy", per_key_interval=0.0, global_rate=50.0)

    def request_created(self, request: PermissionRequest) -> None:
        self.queue.put(Job("", partial(self._fan_out, request.pk, request.team_id), f"ntfy {request.pk}"))

    def request_finished(self, request: PermissionRequest, decision: Decision) -> None:
        return None  # the buttons clear themselves when pressed; a late press gets 409/410

    def request_updated(self, request: PermissionRequest, row: Decision) -> None:
        """A ladder step (reminder, escalation) publishes the ask again to everyone who has not approved it."""
        if row.kind in notify.LADDER_STEPS:
            self.queue.put(
                Job("", partial(self._fan_out, request.pk, request.team_id, again=True), f"ntfy again {request.pk}")
            )

    def _fan_out(self, request_id: uuid.UUID, team_id: int, *, again: bool = False) -> None:
        # Most teams have no one to tell: one read finds that out, and ends the job.
        recipients = selectors.ntfy_topics_for(team_id)
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
        for topic in recipients:
            if topic.user_id in approved:
                continue
            tokens = services.action_tokens_issue(request=request, user=topic.user, channel=CHANNEL, actions=actions)
            body = publish_json(topic.topic, notice, tokens)
            self.queue.put(Job(topic.topic, partial(self.publish, body), f"ntfy {request_id} to {topic.pk}"))

    def publish(self, body: dict[str, Any]) -> int:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            response = httpx.post(
                f"{self.base_url}/", json=body, headers=headers, timeout=TIMEOUT_SECONDS, follow_redirects=False
            )
        except httpx.HTTPError as exc:
            raise Transient(str(exc)) from exc
        if response.status_code == 429:
            raise RetryLater(5.0)
        if response.status_code >= 500:
            raise Transient(f"ntfy answered {response.status_code}")
        if response.status_code >= 400:
            log.warning("ntfy refused a publish to %s: %s %s", body["topic"], response.status_code, response.text[:200])
        return response.status_code


def subscribe_url(topic: NtfyTopic) -> str:
    return f"{settings.GATEHOUSE_NTFY_URL}/{topic.topic}"


_announcer: NtfyAnnouncer | None = None


def get_announcer() -> NtfyAnnouncer:
    global _announcer
    if _announcer is None:
        _announcer = NtfyAnnouncer(settings.GATEHOUSE_NTFY_URL, settings.GATEHOUSE_NTFY_TOKEN)
    return _announcer
