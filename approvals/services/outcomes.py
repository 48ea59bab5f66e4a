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
