"""What the services answer and raise: results, and the errors a caller must handle."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from approvals.models import (
    Decision,
    PermissionRequest,
)

log = logging.getLogger(__name__)


AUDIT_UNAVAILABLE = "audit unavailable: Gatehouse could not record this decision, so it denies the call."


REMEMBER_CHOICES = ("once", "session", "project", "always")
# An answer's limits, the same on every surface (the dashboard's form, the API, chat):
# `services.request_decide` enforces them, and the form and the API serializer take their
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
