"""The escalation ladder: remind the same people, then escalate to the on-call group.

Each step is planned on the request when it is submitted (`remind_at`, `escalate_at`,
each strictly inside the deadline) and taken once by whichever sweeper gets there first:
a conditional update clears the step's time, and the step's audit row is written in the
same transaction. The times live on the row, so a step survives any restart; at the
deadline the timeout policy decides (`request_expire`).
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, transaction
from django.utils import timezone

from approvals import events, selectors
from approvals.audit import append_decision
from approvals.models import AuditKind, Decision, PermissionRequest, RequestState
from approvals.services.outcomes import AUDIT_UNAVAILABLE, AuditUnavailable

log = logging.getLogger(__name__)

STEP_FIELDS = {AuditKind.REMINDER: "remind_at", AuditKind.ESCALATION: "escalate_at"}


def request_ladder_step(*, request: PermissionRequest, kind: str) -> Decision | None:
    """Take one due ladder step of a pending request; None when it is not due or another sweeper took it."""
    field = STEP_FIELDS[AuditKind(kind)]
    now = timezone.now()
    group = selectors.team_settings(request.team_id).on_call_group if kind == AuditKind.ESCALATION else ""
    try:
        with transaction.atomic():
            due = PermissionRequest.objects.filter(
                pk=request.pk, state=RequestState.PENDING, deadline_at__gt=now, **{f"{field}__lte": now}
            )
            if due.update(**{field: None}) != 1:
                return None
            setattr(request, field, None)
            if kind == AuditKind.REMINDER:
                message = "Still waiting for a person: reminded the same people."
            else:
                message = f"Still waiting for a person: escalated to the {group} group."
            row = append_decision(
                request,
                kind=kind,
                behavior="ask",
                message=message,
                reason={"type": "ladder", "step": kind, "group": group},
                decided_by="ladder",
                surface="timer",
            )
            events.announce_updated(request, row)
    except DatabaseError as exc:
        log.error("could not record the %s of %s: %s", kind, request.pk, exc)
        raise AuditUnavailable(AUDIT_UNAVAILABLE) from exc
    return row
