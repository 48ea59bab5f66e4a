"""Answer a pending request: claim it, fence it, audit it, then announce it.

Every ending goes through here: a person's or a surface's answer (`request_decide`), the
agent withdrawing (`request_cancel`) and the deadline (`request_expire`).
"""

from __future__ import annotations

import copy
import functools
import logging
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from approvals import events, questions, selectors
from approvals.audit import append_decision, input_hash
from approvals.extensions import ClaimStore, registry
from approvals.models import (
    Agent,
    Decision,
    PermissionRequest,
    RequestState,
    Rule,
    RuleScope,
)
from approvals.quorum import Requirement
from approvals.services.autopilot import autopilot_after_allow, autopilot_demote, autopilot_to_demote
from approvals.services.outcomes import (
    AUDIT_UNAVAILABLE,
    Answer,
    AuditUnavailable,
    DecideResult,
    ServiceError,
)
from approvals.services.rules import rule_create
from approvals.services.votes import approvers_so_far, request_vote
from approvals.written import Statement, column, message_transaction, table

log = logging.getLogger(__name__)


def request_decide(
    request_id: uuid.UUID | str, answer: Answer, *, loaded: PermissionRequest | None = None
) -> DecideResult:
    """Answer a pending request: claim it, fence it, audit it, then announce it.

    - The claim store (Redis) is the fast path; the conditional update of the row
      (`state = 'pending'`, version bump) is the fence, so a claim-store fault can
      never produce a second decision.
    - `loaded`: the request as the caller already read it, which saves reading it
      again; the fence decides all the same.
    - `answer.answers`: a person's answers to an AskUserQuestion call (question → label);
      the allow then carries them in `updated_input` (`approvals.questions`).
    - Returns `won=False` with the winner's decision for every loser.
    """
    if answer.answers is not None:
        answer = replace(answer, updated_input=_answered(request_id, loaded, answer.answers))
    store = registry.claim_store
    claim = store.claim(str(request_id), f"{answer.by} via {answer.surface}") if store is not None else None
    if store is not None and claim is None:
        finished = _await_holder(store, request_id)
        if finished is not None:
            return finished
        # The holder neither finished nor let go in time (it may have died): the
        # database fence below still lets only one of us decide.
    try:
        result = _decide_fenced(request_id, answer, loaded=loaded)
    finally:
        if claim is not None:
            claim.release()
    if result.won and result.vote is None and answer.reason_type == "user" and answer.behavior == "allow":
        # Never after a quorum: what needs several people must never become a rule.
        autopilot_after_allow(result.request)
    return result


UNANSWERED_QUESTIONS = "This call asks the person questions: allow it with an answer to each (`answers`), or deny it."


# A batch is what one person has seen on one card's bar; a runaway loop of thousands of
# identical calls is better stopped with a rule than decided in one press.
BATCH_LIMIT = 100


def request_decide_batch(
    *,
    requests: list[PermissionRequest],
    behavior: str,
    surface: str,
    user: User | None = None,
    message: str = "",
) -> list[DecideResult]:
    """Answer identical pending calls ("allow these 6 `pytest` runs") once each.

    - Every request goes through `request_decide`: its own claim, fence and audit row,
      so a request someone else decided meanwhile is lost here, never decided twice.
    - Refuses the whole batch, deciding nothing, unless every request is the same call
      (`selectors.same_call_key`). A batch never saves a rule: allow once, or deny.
    """
    if not requests:
        raise ServiceError("A batch decision needs at least one request.")
    if len(requests) > BATCH_LIMIT:
        raise ServiceError(f"A batch decides at most {BATCH_LIMIT} requests; write a rule for more.")
    if len({selectors.same_call_key(request) for request in requests}) != 1:
        raise ServiceError("These requests are not the same call; decide them one by one.")
    if len({request.pk for request in requests}) != len(requests):
        raise ServiceError("A batch names each request once.")
    answer = Answer(behavior=behavior, surface=surface, user=user, message=message)
    return [request_decide(request.pk, answer, loaded=request) for request in requests]


def _answered(request_id: uuid.UUID | str, loaded: PermissionRequest | None, answers: dict[str, Any]) -> dict[str, Any]:
    request = loaded or PermissionRequest.objects.filter(pk=request_id).only("tool_name", "tool_input").first()
    if request is None:
        raise ServiceError("no such request")
    try:
        return questions.answered_input(request.tool_name, request.tool_input, answers)
    except questions.AnswerInvalid as exc:
        raise ServiceError(str(exc)) from None


HOLDER_WAIT_SECONDS = 2.0


def _await_holder(store: ClaimStore, request_id: uuid.UUID | str) -> DecideResult | None:
    """The loser's answer once the claim holder's outcome is known; None if it never came.

    A held claim says who is deciding, not who won: the holder's own fence can still
    lose to a cancel or the deadline, which take no claim. So a loser waits (briefly:
    a holder commits in milliseconds) for the holder to let go, woken by the claim store
    as it does, then reads the row once with its audit row and names the real winner. A
    request still pending then (the holder's audit write failed, or it never let go) is
    the fence's to decide.
    """
    store.wait_released(str(request_id), min(HOLDER_WAIT_SECONDS, settings.GATEHOUSE_CLAIM_TTL_MS / 1000))
    request = selectors.request_with_decision(request_id)
    if request is None or request.state == RequestState.PENDING:
        return None
    return DecideResult(False, request, selectors.joined_decision(request))


def _decide_fenced(request_id: uuid.UUID | str, answer: Answer, *, loaded: PermissionRequest | None) -> DecideResult:
    reason = {
        "type": answer.reason_type,
        "decided_by": answer.by,
        "surface": answer.surface,
        **(answer.reason_extra or {}),
    }
    if loaded is None:
        loaded = selectors.request_get(request_id)
        if loaded is None:
            raise PermissionRequest.DoesNotExist(f"no request {request_id}")
    requirement = Requirement.of(loaded)
    if requirement is not None and answer.behavior == "allow":
        return request_vote(
            loaded,
            requirement,
            user=answer.user,
            surface=answer.surface,
            reason_type=reason["type"],
            remember=answer.remember,
            updated_input=answer.updated_input,
        )
    if requirement is not None:
        # One deny ends a quorum; its row names whoever had approved.
        reason["approvers"] = approvers_so_far(loaded)
    _refuse_unanswered(loaded, answer)
    demoted = autopilot_to_demote(loaded) if answer.behavior == "deny" and reason["type"] == "user" else []
    remembering = answer.behavior == "allow" and answer.remember != "once"
    statement, request = _fence_statement(loaded, RequestState.DECIDED, before_deadline=True)
    try:
        # Nothing but the audit row to write (no grant rule, no autopilot rule to demote):
        # on PostgreSQL the fence goes in the row's own message, checked there.
        with message_transaction(alone=not (remembering or demoted)) as one_message:
            if not one_message and not _moved(statement):
                return lost_or_overdue(request_id)
            decision = _record(request, answer, reason, demoted, fence=[_held(statement)] if one_message else [])
    except DatabaseError as exc:
        if _fence_lost(exc):
            return lost_or_overdue(request_id)
        log.error("audit write failed deciding %s: %s", request_id, exc)
        raise AuditUnavailable(AUDIT_UNAVAILABLE) from exc
    events.announce_finished(request, decision)
    return DecideResult(True, request, decision)


def _refuse_unanswered(request: PermissionRequest, answer: Answer) -> None:
    if (
        answer.behavior == "allow"
        and answer.updated_input is None
        and questions.questions_of(request.tool_name, request.tool_input)
    ):
        # An allow without answers would leave the model's questions unanswered
        # (or put them to whoever is at the terminal): from every surface, one
        # request or a batch, a person answers them or denies the call.
        raise ServiceError(UNANSWERED_QUESTIONS)


def _record(
    request: PermissionRequest,
    answer: Answer,
    reason: dict[str, Any],
    demoted: list[Rule],
    *,
    fence: list[Statement],
) -> Decision:
    """Write the fenced request's audit row (and its grant rule, and the autopilot rules
    its deny demotes) in the fence's transaction; `fence`, the fence itself when it goes
    in the row's message."""
    behavior, message, remember = answer.behavior, answer.message, answer.remember
    if behavior == "allow" and remember != "once":
        reason["saved_rule"] = _remember(request, remember, answer.remember_hours, answer.user)
        # Where Claude Code may keep the same grant (a PermissionRequest's
        # `updatedPermissions`): a session or time-limited grant for the session
        # only, since Claude Code's rules do not expire; a lasting one in the
        # project's local settings.
        reason["saved_for"] = "session" if remember == "session" or answer.remember_hours else "localSettings"
    if behavior == "deny" and not message:
        message = f"Denied by {answer.by} via {answer.surface}. Do not retry this call; try another approach."
    reason.update(autopilot_demote(demoted))
    return append_decision(
        request,
        behavior=behavior,
        message=message,
        reason=reason,
        decided_by=answer.by,
        surface=answer.surface,
        updated_input=answer.updated_input,
        user=answer.user,
        first=fence,
    )


def lost_or_overdue(request_id: uuid.UUID | str) -> DecideResult:
    """A person's decision that lost: to an earlier outcome, or to the deadline it came after.

    A decision after `deadline_at` never counts, even before the sweeper's next pass:
    the request expires here (deny, reason `timeout`) and the late decider is told so.
    """
    current = PermissionRequest.objects.select_related("agent").get(pk=request_id)
    if current.state == RequestState.PENDING:
        expired = request_expire(request=current)
        return DecideResult(False, expired.request, expired.decision)
    return DecideResult(False, current, selectors.decision_for(current))


def fence(request: PermissionRequest, new_state: str, *, before_deadline: bool = False) -> PermissionRequest | None:
    """Move a pending request to `new_state`; None if someone else got there first.

    - `request` as read before: only the conditional update decides, and what it
      changes (state, version, decided_at) is all that a pending request ever changes
      of what the audit row records, so the row need not be read again.
    - `before_deadline`: also None once `deadline_at` has passed (a person's decision).
    """
    if request.state != RequestState.PENDING:
        return None
    statement, fenced = _fence_statement(request, new_state, before_deadline=before_deadline)
    return fenced if _moved(statement) else None


def _fence_statement(
    request: PermissionRequest, new_state: str, *, before_deadline: bool
) -> tuple[Statement, PermissionRequest]:
    """The fence's conditional update, and the request as it is once the update has moved it."""
    now = timezone.now()
    meta = PermissionRequest._meta
    at = meta.get_field("decided_at").get_db_prep_value(now, connection)
    params = [str(new_state), at, meta.pk.get_db_prep_value(request.pk, connection), str(RequestState.PENDING)]
    fenced = copy.copy(request)  # the caller's object keeps saying what it read
    fenced.state = new_state
    fenced.version += 1
    fenced.decided_at = now
    return (_fence_sql(connection.vendor, before_deadline), [*params, at] if before_deadline else params), fenced


def _moved(statement: Statement) -> bool:
    """Run the fence alone; whether it moved the request."""
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        return cursor.rowcount == 1


# The SQLSTATE `gatehouse_fence_held` raises when the fence moved nothing (migration 0027).
FENCE_LOST = "GH409"


def _held(statement: Statement) -> Statement:
    """The fence as the first statement of a message: it raises `FENCE_LOST` unless it moved
    the request, which rolls back the whole message (PostgreSQL)."""
    sql, params = statement
    return _held_sql(sql), params


@functools.cache
def _held_sql(fence_sql: str) -> str:
    return f"WITH fenced AS ({fence_sql} RETURNING 1) SELECT gatehouse_fence_held(count(*)) FROM fenced"  # noqa: S608


def _fence_lost(exc: DatabaseError) -> bool:
    return getattr(exc.__cause__, "sqlstate", None) == FENCE_LOST


# On every decision's path: written once per process and engine rather than compiled per call.
@functools.cache
def _fence_sql(vendor: str, before_deadline: bool) -> str:
    # Every name comes from the model, quoted; the values are parameters.
    state, version = column(PermissionRequest, "state"), column(PermissionRequest, "version")
    decided, deadline = column(PermissionRequest, "decided_at"), column(PermissionRequest, "deadline_at")
    sql = (
        f"UPDATE {table(PermissionRequest)} SET {state} = %s, {version} = {version} + 1, {decided} = %s"  # noqa: S608
        f" WHERE {column(PermissionRequest, 'id')} = %s AND {state} = %s"
    )
    return sql + f" AND ({deadline} IS NULL OR {deadline} > %s)" if before_deadline else sql


def _remember(request: PermissionRequest, remember: str, hours: float | None, user: User | None) -> str:
    """Save the call's grant rule: never wider than the call (`policy.grants`)."""
    text = selectors.grant_rule_for(request)
    if text is None:
        raise ServiceError(
            "This call can only be allowed once: no rule says exactly this call. "
            "An admin can write a wider rule on the rules page."
        )
    expires = timezone.now() + timedelta(hours=hours) if hours else None
    scope = {"session": RuleScope.SESSION, "project": RuleScope.PROJECT, "always": RuleScope.GLOBAL}[remember]
    rule_create(
        rule=text,
        behavior="allow",
        source="session" if remember == "session" else "localSettings",
        team=request.team,
        scope=scope,
        project_path=request.cwd if scope == RuleScope.PROJECT else "",
        session_id=request.session_id if scope == RuleScope.SESSION else "",
        expires_at=expires,
        created_by=user,
        note=f"Saved when approving request {request.pk}",
    )
    return text


def request_cancel(*, request: PermissionRequest, reason: str = "withdrawn by the agent") -> DecideResult:
    """The agent withdrew (answered locally, or its process ended): cancelled everywhere."""
    return _finish_without_person(
        request,
        RequestState.CANCELLED,
        reason={"type": "cancelled", "detail": reason},
        message=f"Request cancelled: {reason}.",
        decided_by=f"agent {request.agent.name}"[:150],
        surface="local" if "local" in reason or "terminal" in reason else "agent",
    )


def request_defer(*, request: PermissionRequest) -> bool:
    """Park a headless session's pending ask until the team's deferred deadline (default 24 h).

    - The session stops with the call pending; its resume asks again with the same
      `tool_use_id` and gets whatever a person decided meanwhile.
    - False when the request is no longer pending.
    """
    deadline = request.created_at + timedelta(seconds=selectors.deferred_timeout(request.team_id))
    if request.deadline_at is not None:
        deadline = max(deadline, request.deadline_at)
    evaluation = {**request.evaluation, "deferred": True}
    parked = PermissionRequest.objects.filter(pk=request.pk, state=RequestState.PENDING).update(
        deadline_at=deadline, evaluation=evaluation
    )
    if parked:
        request.deadline_at, request.evaluation = deadline, evaluation
    return parked == 1


def request_expire(*, request: PermissionRequest) -> DecideResult:
    """Nobody answered before the deadline: deny with reason `timeout`."""
    return _finish_without_person(
        request,
        RequestState.EXPIRED,
        reason={"type": "timeout", "deadline_at": request.deadline_at.isoformat() if request.deadline_at else None},
        message="Nobody approved this call before its deadline, so it was denied. Ask the user before retrying.",
        decided_by="timeout",
        surface="timer",
    )


def _finish_without_person(
    request: PermissionRequest, state: str, *, reason: dict[str, Any], message: str, decided_by: str, surface: str
) -> DecideResult:
    try:
        with transaction.atomic():
            fenced = fence(request, state)
            if fenced is None:
                current = PermissionRequest.objects.get(pk=request.pk)
                return DecideResult(False, current, selectors.decision_for(current))
            decision = append_decision(
                fenced, behavior="deny", message=message, reason=reason, decided_by=decided_by, surface=surface
            )
            events.announce_finished(fenced, decision)
    except DatabaseError as exc:
        raise AuditUnavailable(AUDIT_UNAVAILABLE) from exc
    return DecideResult(True, fenced, decision)


def nul_visible(value: Any) -> Any:
    """`value` with every NUL character, in strings and keys at any depth, shown as ␀ (U+2400)."""
    if isinstance(value, str):
        return value.replace("\x00", "\u2400")
    if isinstance(value, dict):
        return {nul_visible(key): nul_visible(item) for key, item in value.items()}
    if isinstance(value, list):
        return [nul_visible(item) for item in value]
    return value


def request_record_result(*, request: PermissionRequest, ok: bool, output: Any = None, error: str = "") -> bool:
    """Record PostToolUse (ok) or PostToolUseFailure against the request; False if refused.

    - Only a call that may have run takes a result: one allowed, or withdrawn because it
      was answered locally. A denied, expired or pending request never shows as run.
    """
    return _record_result(Q(pk=request.pk), ok, output, error)


def request_record_result_of_call(
    *, agent: Agent, tool_use_id: str, ok: bool, output: Any = None, error: str = ""
) -> bool:
    """`request_record_result` for the agent's request with this `tool_use_id`, found by the
    update itself: one round trip for the usual case, a call that was allowed. False when
    no such request may take a result (none, pending, denied, expired): the caller looks
    further, as it would have."""
    return _record_result(Q(agent=agent, tool_use_id=tool_use_id), ok, output, error)


def _record_result(which: Q, ok: bool, output: Any, error: str) -> bool:
    # A tool's output may hold NUL (binary output), which PostgreSQL cannot store: it is
    # kept visible as U+2400 by every door alike, never refused (the call has run).
    result = {"ok": ok, "output": nul_visible(output)} if ok else {"ok": False, "error": nul_visible(error)}
    may_have_run = Q(state=RequestState.CANCELLED) | Q(state=RequestState.DECIDED, decision__behavior="allow")
    updated = PermissionRequest.objects.filter(may_have_run, which).update(result=result, result_at=timezone.now())
    return updated == 1


def request_join_prompt(*, request: PermissionRequest, suggestions: list[Any]) -> bool:
    """Make a pending request the answer to Claude Code's prompt for the same call.

    - Stores the prompt's `permission_suggestions` and marks the request, so the hook's
      re-poll after a person decides still finds its answer here.
    - False when the request is no longer pending: the caller must not join it.
    """
    evaluation = {**request.evaluation, "permission_prompt": True}
    changes: dict[str, Any] = {"evaluation": evaluation}
    if suggestions:
        changes["permission_suggestions"] = suggestions
    joined = PermissionRequest.objects.filter(pk=request.pk, state=RequestState.PENDING).update(**changes) == 1
    if joined:
        request.evaluation = evaluation
        request.permission_suggestions = changes.get("permission_suggestions", request.permission_suggestions)
    return joined


AUTO_MODE = "Claude Code auto mode"


def request_record_denied_by_agent(*, agent: Agent, call: dict[str, Any], reason: str) -> DecideResult | None:
    """Claude Code refused the call itself (auto mode's classifier, `PermissionDenied`).

    - A call Gatehouse never saw (the PermissionRequest-only gate leaves auto mode to
      Claude Code) gets its request and a deny row in the chain: reason `classifier`.
    - A call still pending here is decided so, everywhere at once.
    - A call Gatehouse already decided keeps its row; its result says it never ran.
    """
    detail = {"type": "classifier", "classifier": AUTO_MODE, "verdict": reason or "denied"}
    message = f"Denied by {AUTO_MODE}: {reason or 'no reason given'}"
    tool_use_id = str(call.get("tool_use_id") or "")
    request = selectors.request_by_tool_use_id(agent=agent, tool_use_id=tool_use_id) if tool_use_id else None
    if request is not None and request.state != RequestState.PENDING:
        request_record_result(request=request, ok=False, error=message)
        return None
    try:
        with transaction.atomic():
            if request is None:
                request = PermissionRequest(
                    agent=agent,
                    team_id=agent.team_id,
                    tool_use_id=tool_use_id or f"gh_{uuid.uuid4().hex}",
                    tool_name=str(call.get("tool_name", "")),
                    tool_input=call.get("tool_input") or {},
                    input_hash=input_hash(call.get("tool_input") or {}),
                    session_id=str(call.get("session_id", "")),
                    cwd=str(call.get("cwd", "")),
                    permission_mode=str(call.get("permission_mode") or "auto"),
                    transcript_path=str(call.get("transcript_path", "")),
                    facts=call.get("facts"),
                    call_context=call.get("call_context") or None,
                    state=RequestState.DECIDED,
                    decided_at=timezone.now(),
                    version=1,
                )
                request.save(force_insert=True)
                fenced: PermissionRequest | None = request
            else:
                fenced = fence(request, RequestState.DECIDED)
                if fenced is None:
                    current = PermissionRequest.objects.get(pk=request.pk)
                    return DecideResult(False, current, selectors.decision_for(current))
            assert fenced is not None
            decision = append_decision(
                fenced, behavior="deny", message=message, reason=detail, decided_by=AUTO_MODE, surface="claude-code"
            )
            events.announce_finished(fenced, decision, at_submit=request is fenced)
    except DatabaseError as exc:
        raise AuditUnavailable(AUDIT_UNAVAILABLE) from exc
    return DecideResult(True, fenced, decision)
