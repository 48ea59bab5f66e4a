"""Votes toward a quorum: one person's approval, counted once, fenced like a decision.

A call that needs N approvals (approvals.quorum) is allowed by the vote that makes N, in
the transaction that records it; a deny from anyone ends it at once (`request_decide`).
Concurrent votes from any mix of surfaces and processes are serialised twice over: the
claim store turns most of them away for a moment (the fast path, as for decisions), and
the conditional update of the request row (`state = 'pending'`, version bump) holds the
row's lock until commit, so each voter counts the votes committed before it. A unique
constraint (one vote per person and request) is the last guard against double counting.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import User
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from approvals import events, quorum, selectors
from approvals.audit import append_decision
from approvals.models import AuditKind, Decision, PermissionRequest, RequestState
from approvals.quorum import Requirement
from approvals.services.outcomes import AUDIT_UNAVAILABLE, AuditUnavailable, DecideResult, ServiceError

log = logging.getLogger(__name__)


def check_voter(request: PermissionRequest, requirement: Requirement, user: User | None, *, reason_type: str) -> None:
    """Raise ServiceError unless this person's approval may count toward the request's quorum.

    - Only people complete a quorum: no classifier, webhook, autopilot or timeout.
    - With the team's `exclude_owner`, the agent's owner never counts on its own calls.
    - With a group, only its members count (and the on-call group's once escalated).
    """
    needs = f"{requirement.required} approval{'s' if requirement.required > 1 else ''}"
    if user is None or reason_type != "user":
        raise ServiceError(
            f"Only people known to Gatehouse can approve this call: it needs {needs} from distinct people. "
            "Link your chat account on your Gatehouse profile, or approve it on the dashboard."
        )
    if requirement.exclude_owner and request.agent.owner_id == user.pk:
        raise ServiceError("You own this agent, so your approval does not count toward its quorum.")
    on_call = selectors.team_settings(request.team_id).on_call_group
    groups = quorum.eligible_groups(request, requirement, on_call)
    if groups and not user.is_superuser and not set(groups) & set(quorum.groups_of(user, request.team_id)):
        raise ServiceError(f"This call needs {needs} from the {' or '.join(groups)} group; you are not in it.")


def request_vote(
    request: PermissionRequest,
    requirement: Requirement,
    *,
    user: User | None,
    surface: str,
    reason_type: str,
    remember: str,
    updated_input: dict[str, Any] | None,
) -> DecideResult:
    """Record one person's approval; allow the call when it makes the quorum.

    - Raises ServiceError for an approval that may not count (see `check_voter`), a
      second approval by the same person, or a grant or edited input (each approver
      approves the call as everyone saw it, once).
    """
    check_voter(request, requirement, user, reason_type=reason_type)
    assert user is not None  # check_voter refused anyone else
    if remember != "once" or updated_input is not None:
        raise ServiceError("A call that needs approvals from several people is approved as it is, once.")
    try:
        with transaction.atomic():
            if not _lock_pending(request):
                lost = True
            else:
                lost = False
                result = _count_vote(request, requirement, user, surface)
    except IntegrityError:
        # The same person's second press, committed between our check and our insert.
        raise ServiceError(_already_voted(request, requirement)) from None
    except DatabaseError as exc:
        log.error("audit write failed voting on %s: %s", request.pk, exc)
        raise AuditUnavailable(AUDIT_UNAVAILABLE) from exc
    if lost:
        from approvals.services.decide import lost_or_overdue  # decide imports this module

        return lost_or_overdue(request.pk)
    return result


def _lock_pending(request: PermissionRequest) -> bool:
    """Bump the pending row's version: its lock, held to commit, queues every other voter."""
    now = timezone.now()
    pending = PermissionRequest.objects.filter(pk=request.pk, state=RequestState.PENDING).filter(
        Q(deadline_at__isnull=True) | Q(deadline_at__gt=now)
    )
    return pending.update(version=F("version") + 1) == 1


def _count_vote(request: PermissionRequest, requirement: Requirement, user: User, surface: str) -> DecideResult:
    from approvals.services.decide import fence  # decide imports this module

    votes = Decision.objects.filter(request_id=request.pk, kind=AuditKind.VOTE)
    if votes.filter(decided_by_user=user).exists():
        raise ServiceError(_already_voted(request, requirement))
    approvers = [*votes.order_by("id").values_list("decided_by", flat=True), user.get_username()]
    vote = append_decision(
        request,
        kind=AuditKind.VOTE,
        behavior="allow",
        message="",
        reason={
            "type": "vote",
            "decided_by": user.get_username(),
            "surface": surface,
            "vote": len(approvers),
            "of": requirement.required,
        },
        decided_by=user.get_username(),
        surface=surface,
        user=user,
    )
    progress = quorum.Progress(requirement.required, approvers, requirement.group, []).sentence()
    if len(approvers) < requirement.required:
        events.announce_updated(request, vote)
        return DecideResult(True, request, None, vote=vote, progress=progress)
    decided = fence(request, RequestState.DECIDED)
    if decided is None:  # we hold the row's lock: nobody else can have moved it
        raise DatabaseError(f"request {request.pk} moved under its lock")
    decision = append_decision(
        decided,
        behavior="allow",
        message="",
        reason={
            "type": "user",
            "decided_by": user.get_username(),
            "surface": surface,
            "approvers": approvers,
            "quorum": requirement.required,
        },
        decided_by=" and ".join([", ".join(approvers[:-1]), approvers[-1]]) if len(approvers) > 1 else approvers[0],
        surface=surface,
        user=user,
    )
    events.announce_finished(decided, decision)
    return DecideResult(True, decided, decision, vote=vote, progress=progress)


def _already_voted(request: PermissionRequest, requirement: Requirement) -> str:
    progress = quorum.progress_of(request)
    so_far = f" ({progress.sentence()})" if progress is not None else ""
    return f"You already approved this call; it needs {requirement.required} approvals from distinct people{so_far}."


def approvers_so_far(request: PermissionRequest) -> list[str]:
    """The people whose approvals a request had (named by a deny that ends the quorum)."""
    rows = Decision.objects.filter(request_id=request.pk, kind=AuditKind.VOTE).order_by("id")
    return list(rows.values_list("decided_by", flat=True))
