"""Chat identities: which Telegram or Slack account is which person.

A link is proven, never typed: the profile page shows a one-time code, and the person
sends it to the bot from the chat account itself (`/link CODE`). A bot cannot message a
person first, and a chat id typed into a form proves nothing (anyone can type anyone's).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.models import ChatIdentity, ChatLinkCode
from approvals.services.outcomes import ServiceError

log = logging.getLogger(__name__)


CHAT_PROVIDERS = ("telegram", "slack")
LINK_CODE_LIFETIME = timedelta(minutes=10)
# Crockford's base32 without the letters people misread; 8 characters are 40 bits. A guesser
# gets a few thousand tries through a bot's rate limits in a code's ten minutes: about 1 in
# 10^8 per outstanding code.
LINK_CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
LINK_CODE_LENGTH = 8


def _code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def normalise_link_code(text: str) -> str:
    """What a person typed, as the code was made: upper case, no dashes or spaces, O as 0."""
    folded = "".join(text.split()).replace("-", "").upper()
    return folded.replace("O", "0").replace("I", "1").replace("L", "1")


def chat_link_code_create(*, user: Any) -> str:
    """A fresh one-time link code for this person (any older one stops working)."""
    ChatLinkCode.objects.filter(user=user).delete()
    code = "".join(secrets.choice(LINK_CODE_ALPHABET) for _ in range(LINK_CODE_LENGTH))
    ChatLinkCode.objects.create(user=user, code_hash=_code_hash(code), expires_at=timezone.now() + LINK_CODE_LIFETIME)
    return f"{code[:4]}-{code[4:]}"


def chat_identity_prove(*, provider: str, external_id: str, code: str) -> ChatIdentity:
    """Link the chat account that sent `code` to the code's person; the code works once.

    - Call only with the sender's id as the chat service reported it (a verified update).
    - Raises `ServiceError` with a sentence for the chat when the code is wrong or expired,
      or the account is proven to be someone else's.
    """
    if provider not in CHAT_PROVIDERS:
        raise ServiceError(f"provider must be one of {', '.join(CHAT_PROVIDERS)}, not {provider!r}")
    external_id = external_id.strip()
    if not external_id:
        raise ServiceError("the chat account id is empty")
    now = timezone.now()
    with transaction.atomic():
        row = (
            ChatLinkCode.objects.select_for_update()
            .select_related("user")
            .filter(code_hash=_code_hash(normalise_link_code(code)), expires_at__gt=now)
            .first()
        )
        # The conditional delete is the fence: of two senders of one code, one links.
        if row is None or not ChatLinkCode.objects.filter(pk=row.pk).delete()[0]:
            raise ServiceError("That code is wrong or has expired. Get a new one on your Gatehouse profile page.")
        user = row.user
        if not user.is_active:
            raise ServiceError("That Gatehouse account is deactivated.")
        others = ChatIdentity.objects.filter(provider=provider, external_id=external_id).exclude(user=user)
        others.filter(proven_at__isnull=True).delete()  # a typed claim by someone else is void
        if others.exists():
            raise ServiceError(f"This {provider} account is linked to another person; they must unlink it first.")
        identity, _ = ChatIdentity.objects.update_or_create(
            user=user, provider=provider, external_id=external_id, defaults={"proven_at": now}
        )
    log.info("chat identity proven provider=%s external_id=%s user=%s", provider, external_id, user.pk)
    return identity


def chat_link_code_burn(*, code: str) -> bool:
    """Make a code useless (it was shown where others read it); True if it was live."""
    deleted, _ = ChatLinkCode.objects.filter(code_hash=_code_hash(normalise_link_code(code))).delete()
    return deleted > 0


def chat_identity_unlink(*, user: Any, identity_id: int) -> bool:
    deleted, _ = ChatIdentity.objects.filter(pk=identity_id, user=user).delete()
    return deleted > 0
