"""Push writes: subscriptions, ntfy topics, and the one-time action tokens behind the buttons."""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from approvals import permissions, quorum
from approvals import selectors as approval_selectors
from approvals.models import Decision, PermissionRequest, RequestState
from approvals.services import Answer, AuditUnavailable, ServiceError
from relay import race
from relay.models import NtfyTopic, PushActionToken, PushSubscription
from relay.push import selectors
from relay.push.endpoints import EndpointRefused, check_endpoint

MAX_SUBSCRIPTIONS_PER_PERSON = 10
SURFACES = {"webpush": "push", "ntfy": "ntfy"}  # channel -> the decision's surface


class SubscriptionRefused(ValueError):
    """A PushSubscription the server will not keep (the message says why)."""


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _b64url(value: str, what: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise SubscriptionRefused(f"keys.{what} is not base64url") from None


def _check_keys(p256dh: str, auth: str) -> None:
    raw = _b64url(p256dh, "p256dh")
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError:
        raise SubscriptionRefused("keys.p256dh is not a P-256 public key (65 bytes, uncompressed)") from None
    if len(_b64url(auth, "auth")) != 16:
        raise SubscriptionRefused("keys.auth must be 16 bytes")


def subscription_save(*, user: User, endpoint: str, p256dh: str, auth: str, user_agent: str = "") -> PushSubscription:
    """Keep a browser's subscription for `user` (the same endpoint again updates its keys)."""
    try:
        endpoint = check_endpoint(endpoint)
    except EndpointRefused as exc:
        raise SubscriptionRefused(str(exc)) from None
    _check_keys(p256dh, auth)
    with transaction.atomic():
        existing = PushSubscription.objects.filter(user=user, endpoint=endpoint).first()
        if existing is not None:
            PushSubscription.objects.filter(pk=existing.pk).update(p256dh=p256dh, auth=auth)
            existing.p256dh, existing.auth = p256dh, auth
            return existing
        if PushSubscription.objects.filter(user=user).count() >= MAX_SUBSCRIPTIONS_PER_PERSON:
            raise SubscriptionRefused(
                f"at most {MAX_SUBSCRIPTIONS_PER_PERSON} browsers per person; remove one on the profile page"
            )
        return PushSubscription.objects.create(
            user=user, endpoint=endpoint, p256dh=p256dh, auth=auth, user_agent=user_agent[:300]
        )


def subscription_delete(*, user: User, subscription_id: int) -> bool:
    """Remove one of the person's own subscriptions; False if they have none by that id."""
    deleted, _ = PushSubscription.objects.filter(user=user, pk=subscription_id).delete()
    return bool(deleted)


def subscription_forget(subscription_id: int) -> None:
    """The push service said the subscription is gone (404/410): stop pushing to it."""
    PushSubscription.objects.filter(pk=subscription_id).delete()


def subscription_sent(subscription_id: int) -> None:
    PushSubscription.objects.filter(pk=subscription_id).update(last_sent_at=timezone.now())


def ntfy_topic_enable(*, user: User) -> NtfyTopic:
    """The person's ntfy topic, made on first use: 128 random bits, so nobody guesses it."""
    topic, _ = NtfyTopic.objects.get_or_create(user=user, defaults={"topic": f"gatehouse-{secrets.token_hex(16)}"})
    return topic


def ntfy_topic_disable(*, user: User) -> bool:
    deleted, _ = NtfyTopic.objects.filter(user=user).delete()
    return bool(deleted)


def token_expiry(request: PermissionRequest) -> datetime:
    """When a notification's tokens stop working: with the ask."""
    return request.deadline_at or timezone.now() + timedelta(seconds=settings.GATEHOUSE_ASK_TIMEOUT)


def action_tokens_issue(
    *,
    request: PermissionRequest,
    user: User,
    channel: str,
    actions: list[str],
    subscription: PushSubscription | None = None,
) -> dict[str, str]:
    """One fresh token per action for one notification; only their digests are stored."""
    tokens = {action: secrets.token_urlsafe(24) for action in actions}
    PushActionToken.objects.bulk_create(
        PushActionToken(
            token_hash=token_digest(token),
            request=request,
            user=user,
            action=action,
            channel=channel,
            subscription=subscription,
            expires_at=token_expiry(request),
        )
        for action, token in tokens.items()
    )
    return tokens


@dataclass(frozen=True)
class Redeemed:
    """How pressing a notification button went: an HTTP status and what to tell the presser."""

    status: int  # 200 decided or approved · 400 · 403 · 404 · 409 someone was first · 410 spent/expired · 503
    code: str
    message: str
    request: PermissionRequest | None = None
    decision: Decision | None = None
    # An approval counted toward a quorum, the call still pending: how far it got (docs/API.md).
    quorum: dict[str, Any] | None = None


def action_redeem(*, token: str, behavior: str | None = None) -> Redeemed:
    """Decide the token's action on its request for its person, once, through the race's door.

    - `behavior`, when the caller repeats it, must be the token's own action (else 400).
    - The token is spent before deciding (one use, even under concurrent presses) and
      given back if the decision could not be recorded, so the person can press again.
    """
    found = selectors.action_token(token_digest(token)) if isinstance(token, str) and len(token) < 100 else None
    if found is None:
        return Redeemed(404, "not_found", "No such action: the link is wrong or was never issued.")
    if behavior is not None and behavior != found.action:
        return Redeemed(400, "behavior_mismatch", f"This token can only {found.action}, not {behavior}.")
    stop = _why_not(found)
    if stop is not None:
        return stop
    spent = PushActionToken.objects.filter(pk=found.pk, spent_at__isnull=True).update(spent_at=timezone.now())
    if spent != 1:
        return Redeemed(410, "spent", "This action was already used.")
    try:
        result = race.answer(
            found.request_id,
            Answer(behavior=found.action, surface=SURFACES.get(found.channel, found.channel), user=found.user),
        )
    except (AuditUnavailable, ServiceError) as exc:
        PushActionToken.objects.filter(pk=found.pk).update(spent_at=None)
        if isinstance(exc, AuditUnavailable):
            return Redeemed(503, "audit_unavailable", "Gatehouse could not record the decision; try again.")
        return Redeemed(400, "invalid", str(exc))
    if not result.won:
        return _finished(result.request, result.decision, result.holder)
    if result.decision is None:
        # One person's approval of a call that needs several: counted, and the call still
        # waits, so the notification must not say "Allowed".
        progress = quorum.progress_of(result.request)
        return Redeemed(
            200,
            "approved",
            f"Approved: {result.progress}. It needs more approvals.",
            result.request,
            None,
            quorum=progress.to_dict() if progress is not None else None,
        )
    verb = "Allowed" if found.action == "allow" else "Denied"
    return Redeemed(200, "decided", f"{verb}.", result.request, result.decision)


def _why_not(found: PushActionToken) -> Redeemed | None:
    """Why a genuine token cannot decide (spent, expired, the ask over, the person gone), or None."""
    if found.spent_at is not None:
        return Redeemed(410, "spent", "This action was already used.")
    if timezone.now() >= found.expires_at:
        return Redeemed(410, "expired", "This ask expired.")
    request = found.request
    if request.state != RequestState.PENDING:
        return _finished(request, approval_selectors.decision_for(request))
    if not permissions.can_decide(found.user, request):
        return Redeemed(403, "forbidden", "You may no longer decide this team's requests.")
    return None


def _finished(request: PermissionRequest | None, decision: Decision | None, holder: str = "") -> Redeemed:
    if request is None:
        return Redeemed(410, "expired", "This ask no longer exists.")
    sentence = request.outcome_sentence(decision, holder=holder or "someone else", late=True)
    message = f"{sentence[:1].upper()}{sentence[1:]}."
    if request.state in (RequestState.EXPIRED, RequestState.CANCELLED):
        return Redeemed(410, "expired", message, request, decision)
    return Redeemed(409, "already_decided", message, request, decision)
