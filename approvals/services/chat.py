"""Chat identities: which Telegram or Slack account is which person."""

from __future__ import annotations

import logging
from typing import Any

from approvals.models import (
    ChatIdentity,
)
from approvals.services.outcomes import ServiceError

log = logging.getLogger(__name__)


CHAT_PROVIDERS = ("telegram", "slack")


def chat_identity_link(*, user: Any, provider: str, external_id: str) -> ChatIdentity:
    """Link a Telegram or Slack account to a person, so their chat taps count as theirs."""
    external_id = external_id.strip()
    if provider not in CHAT_PROVIDERS:
        raise ServiceError(f"provider must be one of {', '.join(CHAT_PROVIDERS)}, not {provider!r}")
    if not external_id:
        raise ServiceError("the chat account id is empty")
    if ChatIdentity.objects.filter(provider=provider, external_id=external_id).exclude(user=user).exists():
        raise ServiceError(f"that {provider} account is already linked to another person")
    identity, _ = ChatIdentity.objects.get_or_create(user=user, provider=provider, external_id=external_id)
    return identity


def chat_identity_unlink(*, user: Any, identity_id: int) -> bool:
    deleted, _ = ChatIdentity.objects.filter(pk=identity_id, user=user).delete()
    return deleted > 0
