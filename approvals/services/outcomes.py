"""What the services take, answer and raise: a surface's `Answer`, results, and the errors a caller must handle."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from approvals.models import (
    Decision,
    PermissionRequest,
)

log = logging.getLogger(__name__)


AUDIT_UNAVAILABLE = "audit unavailable: Gatehouse could not record this decision, so it denies the call."


REMEMBER_CHOICES = ("once", "session", "project", "always")
# An answer's limits, the same on every surface (the dashboard's form, the API, chat):
# `Answer` enforces them, and the form and the API serializer take their
# field limits from here so a person sees the error beside the field.
MAX_ANSWER_MESSAGE_CHARS = 10_000
MAX_REMEMBER_HOURS = 24 * 366  # a grant lasts at most a (leap) year
MIN_REMEMBER_HOURS = 0.01


class AuditUnavailable(Exception):
    """The audit row could not be written; the caller must deny."""


class ServiceError(ValueError):
    """Bad input to a service, with a message a person or a model can act on."""


class ToolUseIdReused(ServiceError):
    """A replay of a `tool_use_id` with a different call: refused, never answered."""


@dataclass(frozen=True, kw_only=True)
class Answer:
    """A person's or a surface's answer to one pending request: valid once it exists.

    - Raises ServiceError on creation for a bad behavior, remember choice, remember_hours
      or message, so every surface (form, API, chat, webhook) meets the same limits.
    - `answers`: a person's answers to an AskUserQuestion call (question → label), only
      with allow; `services.request_decide` turns them into `updated_input`.
    """

    behavior: str
    surface: str
    user: User | None = None
    decided_by: str = ""
    message: str = ""
    updated_input: dict[str, Any] | None = None
    remember: str = "once"
    remember_hours: float | None = None
    reason_type: str = "user"
    reason_extra: dict[str, Any] | None = None
    answers: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.behavior not in ("allow", "deny"):
            raise ServiceError(f"behavior must be allow or deny, not {self.behavior!r}")
        if self.answers is not None and self.behavior != "allow":
            raise ServiceError("answers go with behavior allow: a declined question is a deny without answers")
        if self.remember not in REMEMBER_CHOICES:
            raise ServiceError(f"remember must be one of {', '.join(REMEMBER_CHOICES)}, not {self.remember!r}")
        hours = self.remember_hours
        if hours is not None and not MIN_REMEMBER_HOURS <= hours <= MAX_REMEMBER_HOURS:
            raise ServiceError(f"remember_hours must be between {MIN_REMEMBER_HOURS} and {MAX_REMEMBER_HOURS}")
        if len(self.message) > MAX_ANSWER_MESSAGE_CHARS:
            raise ServiceError(
                f"the message may be at most {MAX_ANSWER_MESSAGE_CHARS:,} characters, not {len(self.message):,}"
            )

    @property
    def by(self) -> str:
        """Who answered, as the audit row and "already decided by …" name them."""
        if self.decided_by:
            return self.decided_by
        return self.user.get_username() if self.user is not None else self.surface


@dataclass(frozen=True)
class SubmitResult:
    request: PermissionRequest
    decision: Decision | None
    created: bool


@dataclass(frozen=True)
class DecideResult:
    won: bool
    request: PermissionRequest
    decision: Decision | None
    # Who holds the claim when the loser arrived before the winner's row committed.
    holder: str = ""
    # A counted approval toward a quorum (its audit row), and how far the quorum got:
    # "1 of 2 — alice approved". `decision` is set too once this vote completed it.
    vote: Decision | None = None
    progress: str = ""
