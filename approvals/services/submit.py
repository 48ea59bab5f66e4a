"""Submit a proposed tool call: run the engine on it, then record its decision or leave it pending.

A decision reaches nobody before its audit row has committed: an allow or deny made here is
written with its `Decision` row in one transaction and announced only from `on_commit`.
When the audit row cannot be written the caller gets `AuditUnavailable` and must deny.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connections
from django.utils import timezone

import policy
import policy.learning
from approvals import changes, events, quorum, selectors, why, written
from approvals.audit import append_decision, input_hash
from approvals.calls import CALL_ID_MAX_CHARS
from approvals.engine_input import engine_input
from approvals.extensions import PreDecisionWork, registry
from approvals.models import (
    Agent,
    Pause,
    PauseAnswer,
    PermissionRequest,
    RequestState,
    RuleSource,
    SessionDenials,
    TeamSettings,
)
from approvals.quorum import Requirement, RuleQuorum
from approvals.rule_cache import compiled_rules_for, quorum_rules_for
from approvals.services.outcomes import AUDIT_UNAVAILABLE, AuditUnavailable, SubmitResult, ToolUseIdReused
from approvals.written import Statement, WrittenInsert
from policy.tools import canonical_rule_tool

log = logging.getLogger(__name__)


def _engine_input(
    agent: Agent,
    call: dict[str, Any],
    denial_state: dict[str, Any] | None,
    team_settings: TeamSettings,
    *,
    rules_version: str,
    providers: bool = True,
) -> dict[str, Any]:
    doc = engine_input(
        call,
        registered_mode=agent.default_mode,
        denial_state=denial_state,
        unknown_tools=team_settings.unknown_tools,
    )
    if agent.pinned_home:
        # A home a team admin pinned beats the one the agent claims.
        doc["home"] = agent.pinned_home
        if isinstance(doc.get("facts"), dict):
            doc["facts"] = {**doc["facts"], "home": agent.pinned_home}
    if agent.pinned_roots:
        doc["pinned_roots"] = list(agent.pinned_roots)
    if providers:
        doc.update(_run_pre_decision(doc, agent.team_id, rules_version))
    return doc


def _run_pre_decision(doc: dict[str, Any], team_id: int, rules_version: str) -> dict[str, Any]:
    """SPEC §4 step 3: PreToolUse webhooks and the classifier run in parallel.

    Each provider is called here, on the request's own thread, where it reads what it
    needs from the database; what it hands back runs on worker threads, which must not
    touch the database. So a request never holds two pooled connections (at 64 agents
    that deadlocked the pool), and a call with nothing to ask starts no thread at all.
    """
    work: list[tuple[Any, PreDecisionWork]] = []
    for provider in registry.pre_decision:
        try:
            job = provider(dict(doc), team_id=team_id, rules_version=rules_version)
        except Exception:
            # Like a Claude Code hook that crashes: no decision from it. The engine's
            # deny and ask rules still apply, so nothing is allowed that would not be.
            log.exception("pre-decision provider %r failed; deciding without it", provider)
            continue
        if job is not None:
            work.append((provider, job))
    if len(work) <= 1:
        results = [_outcome(job) for _, job in work]
    else:
        with ThreadPoolExecutor(max_workers=len(work)) as pool:
            results = list(pool.map(_outcome_on_worker, [job for _, job in work]))
    merged: dict[str, Any] = {}
    for (provider, _), (contribution, error) in zip(work, results, strict=True):
        if error is not None:
            log.error("pre-decision provider %r failed; deciding without it", provider, exc_info=error)
            continue
        hooks = contribution.pop("pre_tool_use_hooks", [])
        merged.setdefault("pre_tool_use_hooks", list(doc["pre_tool_use_hooks"])).extend(hooks)
        merged.update(contribution)
    return merged


def _outcome(job: PreDecisionWork) -> tuple[dict[str, Any], BaseException | None]:
    try:
        return dict(job()), None
    except Exception as exc:
        return {}, exc


def _outcome_on_worker(job: PreDecisionWork) -> tuple[dict[str, Any], BaseException | None]:
    try:
        return _outcome(job)
    finally:
        # The worker thread dies with the pool: should a job have opened a connection
        # after all, it must go back now (close_all only touches this thread's own).
        connections.close_all()


def context_reads_ahead(body: Any, digest: str) -> list[Statement]:
    """The context read of the call in `body` (not yet validated), for the agent whose
    token has `digest`: sent with the token's read (`approvals.auth`), its rows handed to
    `request_submit` as `read_ahead`. Nothing for a body without a `tool_use_id`."""
    if not isinstance(body, dict):
        return []
    tool_use_id, session_id = body.get("tool_use_id"), body.get("session_id") or ""
    # Only text the statement can carry (else it would fail the token's read with it) and
    # a valid call can hold: anything else is the view's to refuse, after the token.
    if not (tool_use_id and _sendable(tool_use_id) and _sendable(session_id)):
        return []
    statement = selectors.submit_context_statement(
        tool_use_id=tool_use_id,
        session_id=session_id,
        pending_limit=settings.GATEHOUSE_MAX_PENDING_PER_AGENT,
        token_digest=digest,
    )
    return [statement]


def _sendable(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= CALL_ID_MAX_CHARS and "\x00" not in value


def request_submit(
    *, agent: Agent, call: dict[str, Any], read_ahead: list[tuple[Any, ...]] | None = None
) -> SubmitResult:
    """Evaluate one proposed tool call; record its decision or leave it pending.

    - Replaying a `tool_use_id` returns the first request and its decision.
    - `read_ahead`: the rows of `context_reads_ahead`, used when they fit this very call
      (`selectors.submit_context`).
    - Raises `AuditUnavailable` when the outcome cannot be recorded.
    """
    tool_use_id = call.get("tool_use_id") or f"gh_{uuid.uuid4().hex}"
    limit = settings.GATEHOUSE_MAX_PENDING_PER_AGENT
    context = selectors.submit_context(
        agent=agent,
        tool_use_id=tool_use_id,
        session_id=call.get("session_id") or "",
        pending_limit=limit,
        read_ahead=read_ahead,
    )
    existing = selectors.request_by_tool_use_id(agent=agent, tool_use_id=tool_use_id) if context.replayed else None
    if existing is not None:
        return SubmitResult(_same_call(existing, call), selectors.decision_for(existing), created=False)

    started = time.perf_counter()
    saved_denials = context.denial_state
    pause = selectors.pause_for(agent) if context.paused else None
    team_settings = context.team_settings
    # A paused agent's call asks no webhook and no classifier: the switch answers it.
    doc = _engine_input(
        agent, call, saved_denials, team_settings, rules_version=context.rules_version, providers=pause is None
    )
    compiled, timeouts = compiled_rules_for(agent, doc["session_id"], doc["cwd"], version=context.rules_version)
    verdict = policy.decide(doc, rules=compiled)
    if pause is not None:
        verdict = _paused(verdict, pause)
    floor = call.get("safety_floor")
    if isinstance(floor, dict) and verdict.behavior == "allow":
        verdict = _for_a_person(verdict)
    verdict, requirement = _quorum(agent, doc, verdict, team_settings, compiled)
    if verdict.behavior == "ask" and context.pending >= limit:
        verdict = _over_pending_limit(verdict)
    engine_ms = (time.perf_counter() - started) * 1000
    tool_name, tool_input = verdict.tool_name or call["tool_name"], call.get("tool_input", {})
    request = PermissionRequest(
        agent=agent,
        team_id=agent.team_id,
        tool_use_id=tool_use_id,
        tool_name=tool_name,
        tool_input=tool_input,
        input_hash=input_hash(tool_input),
        likeness=changes.likeness_hash(tool_name, tool_input),
        session_id=doc["session_id"],
        cwd=doc["cwd"],
        permission_mode=doc["mode"],
        context=doc["context"],
        transcript_path=call.get("transcript_path", ""),
        permission_suggestions=call.get("permission_suggestions", []),
        facts=doc.get("facts"),
        call_context=call.get("call_context") or None,
        evaluation=_evaluation(
            verdict,
            compiled,
            floor if isinstance(floor, dict) else None,
            bool(call.get("permission_prompt")),
        ),
    )
    request.rules_version = context.rules_version
    if verdict.behavior == "ask":
        _plan_ask(request, verdict, timeouts, team_settings, requirement)
    try:
        return _store_submission(agent, request, verdict, engine_ms, saved_denials)
    except IntegrityError as exc:
        # A concurrent replay of the same tool_use_id won the insert.
        existing = selectors.request_by_tool_use_id(agent=agent, tool_use_id=tool_use_id)
        if existing is None:
            log.error("audit write refused for %s: %s", tool_use_id, exc)
            raise AuditUnavailable(AUDIT_UNAVAILABLE) from None
        return SubmitResult(_same_call(existing, call), selectors.decision_for(existing), created=False)
    except DatabaseError as exc:
        log.error("audit write failed for %s: %s", tool_use_id, exc)
        raise AuditUnavailable(AUDIT_UNAVAILABLE) from exc


# How long after its decision a replayed `tool_use_id` still gets the same answer (a
# hook's re-poll, a retried POST); later it is a new call reusing an id: a 409.
REPLAY_WINDOW = timedelta(minutes=10)


def _same_call(existing: PermissionRequest, call: dict[str, Any]) -> PermissionRequest:
    """The replayed request, if the replay really is the same call.

    A replay returns the first call's decision, so it must match (agent, session,
    `tool_use_id`, tool, input hash) and come within `REPLAY_WINDOW` of the decision: `ls`
    allowed, then `rm -rf ~` — or another tool, or another session — under the same id
    must not inherit its allow.
    """
    same_tool = canonical_rule_tool(str(call.get("tool_name", ""))) == canonical_rule_tool(existing.tool_name)
    same = (
        existing.input_hash == input_hash(call.get("tool_input", {}))
        and same_tool
        and existing.session_id == str(call.get("session_id") or "")
    )
    # A deferred call's answer waits for its session's resume, up to the team's deferred deadline.
    window = REPLAY_WINDOW
    if existing.evaluation.get("deferred"):
        window = max(window, timedelta(seconds=selectors.deferred_timeout(existing.team_id)))
    recent = existing.state == RequestState.PENDING or (
        existing.decided_at is not None and timezone.now() - existing.decided_at < window
    )
    if not same or not recent:
        raise ToolUseIdReused(
            f"tool_use_id {existing.tool_use_id!r} was already used for a different call; "
            "send this call with a new tool_use_id."
        )
    return existing


SAFETY_FLOOR_DETAIL = (
    "Claude Code asks a person for this call itself (its safety check: a critical path, a protected "
    "directory, or its own ask rule) after Gatehouse allowed it; no earlier allow, rule, mode or "
    "classifier answers that, only a person."
)


def _over_pending_limit(verdict: policy.Decision) -> policy.Decision:
    """An ask beyond the agent's pending limit is denied (and audited), not queued.

    One agent flooding asks would otherwise bury every team's queue and chat posts. The
    count is read with the call's context (`selectors.submit_context`), before the insert,
    so concurrent submits may pass the limit by a few.
    """
    limit = settings.GATEHOUSE_MAX_PENDING_PER_AGENT
    message = (
        f"This agent already has {limit} calls waiting for a person (GATEHOUSE_MAX_PENDING_PER_AGENT), so this "
        "one was denied. Wait for those answers before asking for more."
    )
    step = {"step": "pendingLimit", "result": "deny", "limit": limit, "overrides": verdict.reason}
    return dataclasses.replace(
        verdict,
        behavior="deny",
        reason={"type": "other", "detail": "pendingLimit", "limit": limit},
        message=message,
        updated_input=None,
        trace=[*verdict.trace, step],
    )


def _paused(verdict: policy.Decision, pause: Pause) -> policy.Decision:
    """The stop switch's answer: deny at once, or ask a person (never an allow); a deny stays a deny."""
    scope = "agent" if pause.agent_id else "team"
    who = pause.created_by.get_username() if pause.created_by else "a team admin"
    subject = "This agent" if scope == "agent" else "This agent's team"
    reason = {"type": "other", "detail": "paused", "scope": scope, "paused_by": who}
    step = {"step": "paused", "result": pause.answer, "scope": scope, "overrides": verdict.reason}
    if pause.answer != PauseAnswer.ASK:
        message = f"{subject} is paused by {who}: every call is denied until a team admin resumes it."
        return dataclasses.replace(
            verdict, behavior="deny", reason=reason, message=message, updated_input=None, trace=[*verdict.trace, step]
        )
    if verdict.behavior == "deny":
        return verdict
    message = f"{subject} is paused by {who}: a person must answer every call until it is resumed."
    return dataclasses.replace(
        verdict,
        behavior="ask",
        reason=reason,
        message=message,
        updated_input=None,
        reserved=True,
        trace=[*verdict.trace, step],
    )


def _for_a_person(verdict: policy.Decision) -> policy.Decision:
    """The engine's allow turned into an ask: Claude Code's safety floor is a person's to answer.

    - Deny verdicts are kept: they are stricter than the floor.
    """
    step = {"step": "safetyFloor", "result": "ask", "overrides": verdict.reason}
    return dataclasses.replace(
        verdict,
        behavior="ask",
        reason={"type": "safetyCheck", "detail": SAFETY_FLOOR_DETAIL},
        message=SAFETY_FLOOR_DETAIL,
        updated_input=None,
        trace=[*verdict.trace, step],
    )


def _evaluation(
    verdict: policy.Decision,
    compiled: policy.CompiledRules,
    safety_floor: dict[str, Any] | None = None,
    permission_prompt: bool = False,
) -> dict[str, Any]:
    """What the engine said, kept on the request (`permission_prompt`: opened by Claude Code's prompt)."""
    data = verdict.to_dict()
    extra: dict[str, Any] = {"safety_floor": safety_floor} if safety_floor is not None else {}
    if verdict.behavior == "ask":
        # The allow rule that came closest, so the card can say why none fit; asks are
        # the rare path, and the rules are already compiled in memory.
        pairs = ((rule.text, rule.behavior) for rule in compiled.rules)
        extra["nearest_rule"] = why.nearest_allow_rule(data["tool_name"], data["tool_input"], pairs)
    if permission_prompt or safety_floor is not None:
        extra["permission_prompt"] = True
    return {
        **extra,
        "behavior": data["behavior"],
        "reason": data["reason"],
        "message": data["message"],
        "warnings": data["warnings"],
        "trace": data["trace"],
        "suggested_rules": data["suggested_rules"],
        "destructive_warning": data["destructive_warning"],
        "updated_input": data["updated_input"],
        "reserved": data["reserved"],
    }


# The insert of an ask (see approvals.written); a call decided at submit is inserted with
# its audit row, naming it (approvals.audit, `new_request`).
_REQUEST_INSERT = WrittenInsert(PermissionRequest)


def _store_submission(
    agent: Agent,
    request: PermissionRequest,
    verdict: policy.Decision,
    engine_ms: float,
    saved_denials: dict[str, Any] | None,
) -> SubmitResult:
    now = timezone.now()
    save_denials = bool(request.session_id) and verdict.denial_state != (saved_denials or {})
    # The request, or the call's audit row and the request naming it, are one message
    # (approvals.written): on PostgreSQL that message is the whole transaction, unless the
    # session's denial state is written with it.
    decision = None
    # An ask's card, for this process's dashboards, is read in the ask's own message, after
    # its insert: one round trip fewer before the agent hears "pending". The reads are in
    # the ask's transaction, so one that failed would fail the ask, closed (the agent is
    # told to send it again); they are the reads `load_cards` makes, written out once.
    card = None
    if verdict.behavior == "ask" and registry.cards is not None:
        card = registry.cards.read_here(request.pk, request.team_id)
    card_rows: list[list[tuple[Any, ...]]] = []
    with written.message_transaction(alone=not save_denials):
        if save_denials:
            _save_denial_state(agent, request.session_id, verdict.denial_state)
        if verdict.behavior == "ask":
            card_rows = _REQUEST_INSERT.insert(request, then=card.statements if card is not None else ())
        else:
            request.state = RequestState.DECIDED
            request.decided_at = now
            request.version = 1
            decision = append_decision(
                request,
                behavior=verdict.behavior,
                message=verdict.message,
                updated_input=verdict.updated_input,
                reason=verdict.reason,
                decided_by=_engine_decider(verdict.reason),
                surface="engine",
                latency_ms=engine_ms,
                new_request=True,
            )
    # Announced once the block has committed (or, inside a caller's transaction, as that
    # commits): the announcers read (Web Push its browsers), and a message transaction
    # allows its one message only.
    if decision is None:
        events.announce_created(request, card, card_rows)
    else:
        events.announce_finished(request, decision, at_submit=True)
    return SubmitResult(request, decision, created=True)


def ask_timeout(verdict: policy.Decision, timeouts: dict[str, int], team_settings: TeamSettings) -> int:
    """The ask's one deadline, in seconds: the first that applies of the matching rule's
    `ask_timeout`, the team's setting, `GATEHOUSE_ASK_TIMEOUT`."""
    reason = verdict.reason
    key = f"{reason.get('source', '')}:{reason.get('rule', '')}"
    return int(timeouts.get(key) or team_settings.ask_timeout or settings.GATEHOUSE_ASK_TIMEOUT)


def _plan_ask(
    request: PermissionRequest,
    verdict: policy.Decision,
    timeouts: dict[str, int],
    team_settings: TeamSettings,
    requirement: Requirement | None,
) -> None:
    """The ask's deadline, its ladder steps (each strictly inside the deadline), its quorum."""
    now = timezone.now()
    seconds = ask_timeout(verdict, timeouts, team_settings)
    request.deadline_at = now + timedelta(seconds=seconds)
    ladder: dict[str, Any] = {}
    if team_settings.remind_after and team_settings.remind_after < seconds:
        request.remind_at = now + timedelta(seconds=team_settings.remind_after)
        ladder["remind_after"] = team_settings.remind_after
    if team_settings.escalate_after and team_settings.escalate_after < seconds and team_settings.on_call_group:
        request.escalate_at = now + timedelta(seconds=team_settings.escalate_after)
        ladder.update(escalate_after=team_settings.escalate_after, on_call_group=team_settings.on_call_group)
    if ladder:
        request.evaluation["ladder"] = ladder
    if requirement is not None:
        request.evaluation["quorum"] = requirement.to_dict()
        request.evaluation["reserved"] = True  # only people complete a quorum


def _quorum(
    agent: Agent,
    doc: dict[str, Any],
    verdict: policy.Decision,
    team_settings: TeamSettings,
    compiled: policy.CompiledRules,
) -> tuple[policy.Decision, Requirement | None]:
    """What the call needs of people (docs/POLICY.md, "Quorum"), and the verdict that follows.

    A call a quorum rule or risk class covers is never allowed without people: an allow
    from a rule (one saved from a grant or by the autopilot included), a mode, a hook, a
    classifier or a headless session's PermissionRequest webhook becomes an ask, or a
    deny where nobody can be asked.
    """
    if verdict.behavior == "deny":
        return verdict, None
    asked = verdict.behavior == "ask"
    # A PermissionRequest webhook answers a headless session's asks (as in Claude Code):
    # what it answered is the ask a person would have seen, so judge that one.
    people = _asked_of_people(doc, verdict, compiled)
    matched = (
        [q for q, rules in quorum_rules_for(agent, doc["session_id"], doc["cwd"]) if _matches(doc, q, rules)]
        if people.behavior == "ask"
        else []
    )
    requirement = quorum.requirement_for(
        team_settings,
        asked=asked,
        matched=matched,
        destructive=bool(verdict.destructive_warning or people.destructive_warning),
        protected_path=people.reason.get("type") == "safetyCheck",
    )
    if requirement is None or asked:
        return verdict, requirement
    return _for_people(verdict, requirement, doc), requirement


def _without_headless_answers(doc: dict[str, Any]) -> dict[str, Any]:
    """The call as a person would be asked about it: no PermissionRequest webhook answering it."""
    return {key: value for key, value in doc.items() if key != "permission_request_hooks"} | {
        "context": "interactive" if doc.get("context") == "headless" else doc.get("context", "interactive")
    }


def _asked_of_people(doc: dict[str, Any], verdict: policy.Decision, compiled: policy.CompiledRules) -> policy.Decision:
    """The ask a headless session's PermissionRequest webhook allowed, or the verdict itself."""
    by_webhook = any(
        step.get("layer") == "resolveAsk" and step.get("by") == "permissionRequestHook" for step in verdict.trace
    )
    if verdict.behavior != "allow" or not by_webhook:
        return verdict
    return policy.decide(_without_headless_answers(doc), rules=compiled)


def _matches(doc: dict[str, Any], rule: RuleQuorum, compiled: policy.CompiledRules) -> bool:
    """Whether this ask rule alone matches the call (hooks, classifier and headless answers left out)."""
    alone = {key: value for key, value in _without_headless_answers(doc).items() if key != "classifier_verdict"}
    alone["pre_tool_use_hooks"] = []
    reason = policy.decide(alone, rules=compiled).reason
    return reason.get("type") == "rule" and reason.get("rule") == rule.rule


def _for_people(verdict: policy.Decision, requirement: Requirement, doc: dict[str, Any]) -> policy.Decision:
    """An allow that a risk class covers, turned into an ask (a deny where nobody can be asked)."""
    needs = f"{requirement.required} approval{'s' if requirement.required > 1 else ''}"
    detail = f"quorum: {', '.join(requirement.covered_by)} calls need {needs} from people"
    step = {"step": "quorum", "result": "ask", "required": requirement.required, "overrides": verdict.reason}
    nobody = doc.get("context") == "headless" or doc.get("mode") == "dontAsk"
    message = (
        f"This call needs {needs} from people ({', '.join(requirement.covered_by)}), and this session cannot "
        "wait for them, so it was denied."
        if nobody
        else f"This call needs {needs} from people ({', '.join(requirement.covered_by)})."
    )
    return dataclasses.replace(
        verdict,
        behavior="deny" if nobody else "ask",
        reason={"type": "other", "detail": detail},
        message=message,
        updated_input=None,
        reserved=True,
        trace=[*verdict.trace, {**step, "result": "deny" if nobody else "ask"}],
    )


def _save_denial_state(agent: Agent, session_id: str, state: dict[str, Any]) -> None:
    # One upsert (INSERT ... ON CONFLICT DO UPDATE), no savepoint: the first two calls of
    # a session may both insert, and neither may fail the other's audit write.
    SessionDenials.objects.bulk_create(
        [SessionDenials(agent=agent, session_id=session_id, state=state)],
        update_conflicts=True,
        unique_fields=["agent", "session_id"],
        update_fields=["state", "updated_at"],
    )


def _engine_decider(reason: dict[str, Any]) -> str:
    # "rule Bash(git status)", "mode dontAsk", "other no permission needed": what, not just which kind;
    # "autopilot Bash(npm run test:*)" for an approval the autopilot made.
    kind = "autopilot" if reason.get("source") == RuleSource.AUTOPILOT else reason.get("type", "other")
    name = (
        reason.get("rule")
        or reason.get("hook")
        or reason.get("classifier")
        or reason.get("mode")
        or reason.get("detail")
        or ""
    )
    return f"{kind} {name}".strip()[:150]
