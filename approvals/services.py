"""Every write Gatehouse makes. Views, consumers, bridges and commands call these.

The contract that matters most: a decision reaches nobody before its audit row has
committed. Each function that decides writes the `Decision` row in the same transaction
as the request's state change and announces only from `transaction.on_commit`. When the
audit row cannot be written the caller gets `AuditUnavailable` and must deny.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import logging
import posixpath
import secrets
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, IntegrityError, connections, transaction
from django.db.models import F, Q
from django.utils import timezone

import policy
import policy.learning
from approvals import events, learning, selectors, why
from approvals.audit import chain_head, chained_fields, input_hash, lock_chain_head, payload_hash
from approvals.audit_search import search_text
from approvals.engine_input import engine_input, engine_rule_items
from approvals.extensions import Claim, ClaimStore, PreDecisionWork, registry
from approvals.models import (
    Agent,
    AuditSearch,
    AutopilotSetting,
    ChatIdentity,
    Decision,
    Membership,
    Mode,
    PermissionRequest,
    PersonalToken,
    RequestState,
    Role,
    Rule,
    RuleBehavior,
    RuleScope,
    RuleSource,
    SessionDenials,
    Team,
)
from policy.facts import is_normal_absolute
from policy.tools import canonical_rule_tool

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


# --- tokens -----------------------------------------------------------------------------


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _new_token(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(32)}"


def default_team() -> Team:
    team, _ = Team.objects.get_or_create(name="default")
    return team


def agent_create(
    *,
    name: str,
    team: Team | None = None,
    owner: User | None = None,
    mode: str = "default",
    roots: list[str] | None = None,
    home: str = "",
) -> tuple[Agent, str]:
    """Register an agent; return it and its token (shown once, stored hashed)."""
    if mode not in Mode.values:
        raise ServiceError(f"unknown mode {mode!r}; use one of {', '.join(Mode.values)}")
    pinned_roots, pinned_home = _pins(roots or [], home)
    team = team or default_team()
    if Agent.objects.filter(team=team, name=name).exists():
        raise ServiceError(f"an agent named {name!r} already exists in team {team.name!r}")
    token = _new_token("gha")
    agent = Agent.objects.create(
        name=name,
        team=team,
        owner=owner,
        default_mode=mode,
        token_hash=token_hash(token),
        token_prefix=token[:8],
        pinned_roots=pinned_roots,
        pinned_home=pinned_home,
    )
    return agent, token


def agent_pin(*, agent: Agent, roots: list[str], home: str) -> Agent:
    """Pin (or, with empty values, unpin) an agent's project roots and home."""
    agent.pinned_roots, agent.pinned_home = _pins(roots, home)
    agent.save(update_fields=["pinned_roots", "pinned_home"])
    return agent


MAX_PINNED_ROOTS = 50


def _pins(roots: list[str], home: str) -> tuple[list[str], str]:
    """Normalised absolute paths, or a ServiceError naming the first bad one."""
    if len(roots) > MAX_PINNED_ROOTS:
        raise ServiceError(f"at most {MAX_PINNED_ROOTS} project roots")
    return [_pinned_path(root) for root in roots if root], _pinned_path(home) if home else ""


def _pinned_path(path: str) -> str:
    normal = posixpath.normpath(path)
    if "\x00" in path or not is_normal_absolute(normal):
        raise ServiceError(f"{path[:80]!r} is not an absolute path")
    return normal


def agent_revoke(*, agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


def agent_touch(*, agent: Agent) -> None:
    """Record that the agent was seen, at most once a minute (it is on every request)."""
    now = timezone.now()
    if agent.last_seen_at is None or now - agent.last_seen_at > timedelta(minutes=1):
        # Conditional: of many concurrent calls of one agent past the minute, only the
        # first rewrites the row; the others match nothing once it has committed.
        stale = Q(last_seen_at__isnull=True) | Q(last_seen_at__lt=now - timedelta(minutes=1))
        try:
            Agent.objects.filter(stale, pk=agent.pk).update(last_seen_at=now)
        except DatabaseError as exc:
            # Best effort: with the database locked, authentication must still succeed so
            # the call reaches the code that answers "audit unavailable", not a 500.
            log.warning("could not record that agent %s was seen: %s", agent.pk, exc)
            return
        agent.last_seen_at = now


def personal_token_touch(*, token: PersonalToken) -> None:
    """Record when a personal token was last used, at most once a minute."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        PersonalToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


def personal_token_revoke(*, token: PersonalToken) -> None:
    PersonalToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


TOKEN_LIFETIMES_DAYS = (0, 7, 30, 90, 365)  # 0: until revoked


def personal_token_create(*, user: User, expires_in_days: int = 0) -> str:
    """A new personal API token (shown once); it stops working after `expires_in_days` (0: never)."""
    if expires_in_days not in TOKEN_LIFETIMES_DAYS:
        raise ServiceError(f"a token lasts one of {TOKEN_LIFETIMES_DAYS} days (0: until revoked)")
    token = _new_token("ghp")
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    PersonalToken.objects.create(user=user, token_hash=token_hash(token), token_prefix=token[:8], expires_at=expires_at)
    return token


def personal_token_revoke_own(*, user: User, token_id: int) -> bool:
    """Revoke one of the person's own tokens; False when they have no such live token."""
    return (
        PersonalToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
        == 1
    )


def person_credentials_changed(*, user: User) -> None:
    """A person's password changed: every open dashboard socket of theirs closes.

    Their sessions stop working at the next HTTP request (Django's session hash); the
    sockets opened before must not outlive them, on any device.
    """
    events.end_user_sessions(user.pk)


def person_deactivate(*, user: User) -> None:
    """Deactivate a person: they cannot log in, and every open dashboard socket of theirs closes."""
    User.objects.filter(pk=user.pk).update(is_active=False)
    user.is_active = False
    events.end_user_sessions(user.pk)


def membership_set(*, user: User, team: Team, role: str) -> Membership:
    if role not in Role.values:
        raise ServiceError(f"unknown role {role!r}; use approver or viewer")
    membership, _ = Membership.objects.update_or_create(user=user, team=team, defaults={"role": role})
    return membership


# --- rules ------------------------------------------------------------------------------


def _validated_rule(rule: str, behavior: str, source: str) -> str:
    if behavior not in RuleBehavior.values:
        raise ServiceError(f"behavior must be allow, deny or ask, not {behavior!r}")
    if source not in RuleSource.values:
        raise ServiceError(f"unknown source {source!r}; use one of {', '.join(RuleSource.values)}")
    try:
        return str(policy.parse_rule(rule))
    except policy.RuleSyntaxError as exc:
        raise ServiceError(f"invalid rule {rule!r}: {exc}") from None


def rule_create(
    *,
    rule: str,
    behavior: str,
    source: str,
    team: Team,
    scope: str = RuleScope.GLOBAL,
    agent: Agent | None = None,
    project_path: str = "",
    session_id: str = "",
    expires_at: datetime | None = None,
    ask_timeout: int | None = None,
    created_by: User | None = None,
    note: str = "",
) -> Rule:
    text = _validated_rule(rule, behavior, source)
    _check_scope(scope, agent, project_path, session_id)
    return Rule.objects.create(
        rule=text,
        behavior=behavior,
        source=source,
        team=team,
        scope=scope,
        agent=agent,
        project_path=project_path,
        session_id=session_id,
        expires_at=expires_at,
        ask_timeout=ask_timeout,
        created_by=created_by,
        note=note,
    )


def rule_validate(
    *,
    rule: str,
    behavior: str,
    source: str,
    scope: str = RuleScope.GLOBAL,
    agent: Agent | None = None,
    project_path: str = "",
    session_id: str = "",
) -> str:
    """Check a rule as `rule_create` would, saving nothing (a what-if draft); its normalised text."""
    text = _validated_rule(rule, behavior, source)
    _check_scope(scope, agent, project_path, session_id)
    return text


def rule_update(*, rule: Rule, rule_text: str | None = None, **changes: Any) -> Rule:
    """Change a rule's fields; `rule_text` changes the rule string (`rule` names the row)."""
    if rule_text is not None:
        changes["rule"] = rule_text
    for name, value in changes.items():
        setattr(rule, name, value)
    rule.rule = _validated_rule(rule.rule, rule.behavior, rule.source)
    _check_scope(rule.scope, rule.agent, rule.project_path, rule.session_id)
    rule.save()
    return rule


def rule_delete(*, rule: Rule) -> None:
    rule.delete()


def _check_scope(scope: str, agent: Agent | None, project_path: str, session_id: str) -> None:
    if scope not in RuleScope.values:
        raise ServiceError(f"scope must be one of {', '.join(RuleScope.values)}, not {scope!r}")
    if scope == RuleScope.AGENT and agent is None:
        raise ServiceError("a rule with scope 'agent' needs an agent")
    if scope == RuleScope.PROJECT and not project_path:
        raise ServiceError("a rule with scope 'project' needs a project_path")
    if scope == RuleScope.SESSION and not session_id:
        raise ServiceError("a rule with scope 'session' needs a session_id")


def _compiled(rules: list[Rule]) -> policy.CompiledRules:
    return policy.compile_rules(engine_rule_items(rules))


@dataclass
class _TeamRuleCache:
    """One team's rules at one version, and what was compiled from them per kind of call."""

    rules: selectors.TeamRules
    compiled: dict[tuple[int, ...], tuple[policy.CompiledRules, dict[str, int]]] = field(default_factory=dict)


# team id -> its rules at the version last read. Every call re-reads the version (one
# small row, changed by a trigger in the same commit as any rule change), so a new deny
# rule applies to the very next call in every process; a TTL would leave a window.
_team_rule_caches: dict[int, _TeamRuleCache] = {}
_COMPILED_PER_TEAM = 1024


def compiled_rules_for(agent: Agent, session_id: str, cwd: str) -> tuple[policy.CompiledRules, dict[str, int]]:
    """The engine's view of the rules that apply to one call, compiled once per rule set.

    Returns the compiled rules and a map from rule text+source to its `Rule.ask_timeout`.
    """
    version = selectors.rules_version(agent.team_id)
    cache = _team_rule_caches.get(agent.team_id)
    if cache is None or cache.rules.version != version:
        cache = _TeamRuleCache(selectors.team_rules(agent.team_id, version))
        _team_rule_caches[agent.team_id] = cache
    rules = cache.rules.covering(agent_id=agent.pk, session_id=session_id, cwd=cwd)
    # The team-wide rules are the same for every call at this version: the rest names it.
    key = tuple(r.pk for r in rules if r.scope != RuleScope.GLOBAL)
    found = cache.compiled.get(key)
    if found is None:
        timeouts = {f"{r.source}:{r.rule}": r.ask_timeout for r in rules if r.ask_timeout}
        found = (_compiled(rules), timeouts)
        if len(cache.compiled) >= _COMPILED_PER_TEAM:
            cache.compiled.clear()  # many sessions at one version: start over, never grow
        cache.compiled[key] = found
    return found


# --- requests ---------------------------------------------------------------------------


def _engine_input(agent: Agent, call: dict[str, Any], denial_state: dict[str, Any] | None) -> dict[str, Any]:
    doc = engine_input(call, registered_mode=agent.default_mode, denial_state=denial_state)
    if agent.pinned_home:
        # A home a team admin pinned beats the one the agent claims.
        doc["home"] = agent.pinned_home
        if isinstance(doc.get("facts"), dict):
            doc["facts"] = {**doc["facts"], "home": agent.pinned_home}
    if agent.pinned_roots:
        doc["pinned_roots"] = list(agent.pinned_roots)
    doc.update(_run_pre_decision(doc, agent.team_id))
    return doc


def _stored_denial_state(agent: Agent, session_id: str) -> dict[str, Any] | None:
    """The session's saved denial state; None when nothing is saved (or there is no session)."""
    if not session_id:
        return None
    return SessionDenials.objects.filter(agent=agent, session_id=session_id).values_list("state", flat=True).first()


def _run_pre_decision(doc: dict[str, Any], team_id: int) -> dict[str, Any]:
    """SPEC §4 step 3: PreToolUse webhooks and the classifier run in parallel.

    Each provider is called here, on the request's own thread, where it reads what it
    needs from the database; what it hands back runs on worker threads, which must not
    touch the database. So a request never holds two pooled connections (at 64 agents
    that deadlocked the pool), and a call with nothing to ask starts no thread at all.
    """
    work: list[tuple[Any, PreDecisionWork]] = []
    for provider in registry.pre_decision:
        try:
            job = provider(dict(doc), team_id=team_id)
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


def request_submit(*, agent: Agent, call: dict[str, Any]) -> SubmitResult:
    """Evaluate one proposed tool call; record its decision or leave it pending.

    - Replaying a `tool_use_id` returns the first request and its decision.
    - Raises `AuditUnavailable` when the outcome cannot be recorded.
    """
    tool_use_id = call.get("tool_use_id") or f"gh_{uuid.uuid4().hex}"
    existing = selectors.request_by_tool_use_id(agent=agent, tool_use_id=tool_use_id)
    if existing is not None:
        return SubmitResult(_same_call(existing, call), selectors.decision_for(existing), created=False)

    started = time.perf_counter()
    saved_denials = _stored_denial_state(agent, call.get("session_id", ""))
    doc = _engine_input(agent, call, saved_denials)
    compiled, timeouts = compiled_rules_for(agent, doc["session_id"], doc["cwd"])
    verdict = policy.decide(doc, rules=compiled)
    floor = call.get("safety_floor")
    if isinstance(floor, dict) and verdict.behavior == "allow":
        verdict = _for_a_person(verdict)
    if verdict.behavior == "ask" and selectors.pending_count(agent) >= settings.GATEHOUSE_MAX_PENDING_PER_AGENT:
        verdict = _over_pending_limit(verdict)
    engine_ms = (time.perf_counter() - started) * 1000
    request = PermissionRequest(
        agent=agent,
        team_id=agent.team_id,
        tool_use_id=tool_use_id,
        tool_name=verdict.tool_name or call["tool_name"],
        tool_input=call.get("tool_input", {}),
        input_hash=input_hash(call.get("tool_input", {})),
        session_id=doc["session_id"],
        cwd=doc["cwd"],
        permission_mode=doc["mode"],
        context=doc["context"],
        transcript_path=call.get("transcript_path", ""),
        permission_suggestions=call.get("permission_suggestions", []),
        facts=doc.get("facts"),
        evaluation=_evaluation(
            verdict,
            compiled,
            floor if isinstance(floor, dict) else None,
            bool(call.get("permission_prompt")),
        ),
    )
    try:
        return _store_submission(agent, request, verdict, engine_ms, timeouts, saved_denials)
    except IntegrityError:
        # A concurrent replay of the same tool_use_id won the insert.
        existing = selectors.request_by_tool_use_id(agent=agent, tool_use_id=tool_use_id)
        if existing is None:
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
    recent = existing.state == RequestState.PENDING or (
        existing.decided_at is not None and timezone.now() - existing.decided_at < REPLAY_WINDOW
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
    count is read before the insert, so concurrent submits may pass the limit by a few.
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


def _store_submission(
    agent: Agent,
    request: PermissionRequest,
    verdict: policy.Decision,
    engine_ms: float,
    timeouts: dict[str, int],
    saved_denials: dict[str, Any] | None,
) -> SubmitResult:
    now = timezone.now()
    with transaction.atomic():
        if request.session_id and verdict.denial_state != (saved_denials or {}):
            _save_denial_state(agent, request.session_id, verdict.denial_state)
        if verdict.behavior == "ask":
            request.deadline_at = now + timedelta(seconds=_ask_timeout(verdict, timeouts))
            request.save(force_insert=True)
            events.announce_created(request)
            return SubmitResult(request, None, created=True)
        request.state = RequestState.DECIDED
        request.decided_at = now
        request.version = 1
        request.save(force_insert=True)
        decision = _append_decision(
            request,
            behavior=verdict.behavior,
            message=verdict.message,
            updated_input=verdict.updated_input,
            reason=verdict.reason,
            decided_by=_engine_decider(verdict.reason),
            surface="engine",
            latency_ms=engine_ms,
        )
        events.announce_finished(request, decision, at_submit=True)
    return SubmitResult(request, decision, created=True)


def _ask_timeout(verdict: policy.Decision, timeouts: dict[str, int]) -> int:
    reason = verdict.reason
    key = f"{reason.get('source', '')}:{reason.get('rule', '')}"
    return int(timeouts.get(key) or settings.GATEHOUSE_ASK_TIMEOUT)


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
    # "rule Bash(git status)", "mode dontAsk", "other unknownTool": what, not just which kind;
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


def _append_decision(
    request: PermissionRequest,
    *,
    behavior: str,
    message: str,
    reason: dict[str, Any],
    decided_by: str,
    surface: str,
    updated_input: dict[str, Any] | None = None,
    user: User | None = None,
    latency_ms: float | None = None,
) -> Decision:
    """Write the audit row at the head of the hash chain. Call inside `transaction.atomic()`."""
    now = timezone.now()
    if latency_ms is None:
        latency_ms = (now - request.created_at).total_seconds() * 1000
    fields = {
        "request": request,
        "agent_id": request.agent_id,
        "team_id": request.team_id,
        "tool_name": request.tool_name,
        "session_id": request.session_id,
        "behavior": behavior,
        "message": message,
        "updated_input": updated_input,
        "reason_type": str(reason.get("type", "other")),
        "reason": reason,
        "rule": str(reason.get("rule", ""))[:4096],
        "rule_source": str(reason.get("source", ""))[:32] if reason.get("rule") else "",
        "decided_by": decided_by[:150],
        "decided_by_user": user,
        "surface": surface,
        "latency_ms": latency_ms,
        "created_at": now,
    }
    # Writers never race for the head: on PostgreSQL they queue on an advisory lock held
    # to commit, and SQLite's IMMEDIATE transactions hold its one write lock from BEGIN.
    # So no savepoint and no retry: should a writer that bypassed the lock ever read the
    # same head, the unique prev_hash refuses the second insert, its whole transaction
    # rolls back and the caller denies (AuditUnavailable); the chain never forks.
    decision = Decision(**fields)
    # What the hash covers (the request too, its agent's name read here) is gathered
    # before the chain's lock, which is then held only for the head read and the insert.
    payload = chained_fields(decision)
    lock_chain_head()
    decision.prev_hash = chain_head()
    decision.hash = payload_hash(decision.prev_hash, payload)
    try:
        decision.save(force_insert=True)
    except IntegrityError as exc:
        log.error("audit insert refused for request %s: %s", request.pk, exc)
        raise
    _index_for_search(decision, request)
    return decision


def _index_for_search(decision: Decision, request: PermissionRequest) -> None:
    """The row's search text, in the audit row's transaction (see approvals.audit_search)."""
    text = search_text(request.tool_name, request.tool_input, message=decision.message, rule=decision.rule)
    AuditSearch.objects.create(decision=decision, text=text)


def request_decide(
    *,
    request_id: uuid.UUID | str,
    behavior: str,
    surface: str,
    user: User | None = None,
    decided_by: str = "",
    message: str = "",
    updated_input: dict[str, Any] | None = None,
    remember: str = "once",
    remember_hours: float | None = None,
    reason_type: str = "user",
    reason_extra: dict[str, Any] | None = None,
    loaded: PermissionRequest | None = None,
) -> DecideResult:
    """Answer a pending request: claim it, fence it, audit it, then announce it.

    - The claim store (Redis) is the fast path; the conditional update of the row
      (`state = 'pending'`, version bump) is the fence, so a claim-store fault can
      never produce a second decision.
    - `loaded`: the request as the caller already read it, which saves reading it
      again; the fence decides all the same.
    - Returns `won=False` with the winner's decision for every loser.
    """
    if behavior not in ("allow", "deny"):
        raise ServiceError(f"behavior must be allow or deny, not {behavior!r}")
    if remember not in REMEMBER_CHOICES:
        raise ServiceError(f"remember must be one of {', '.join(REMEMBER_CHOICES)}, not {remember!r}")
    decided_by = decided_by or (user.get_username() if user is not None else surface)
    store = registry.claim_store
    claim = store.claim(str(request_id), f"{decided_by} via {surface}") if store is not None else None
    if store is not None and claim is None:
        finished = _await_holder(store, request_id)
        if finished is not None:
            return finished
        # The holder neither finished nor let go in time (it may have died): the
        # database fence below still lets only one of us decide.
    try:
        result = _decide_fenced(
            request_id,
            loaded=loaded,
            claim=claim,
            behavior=behavior,
            surface=surface,
            user=user,
            decided_by=decided_by,
            message=message,
            updated_input=updated_input,
            remember=remember,
            remember_hours=remember_hours,
            reason={"type": reason_type, "decided_by": decided_by, "surface": surface, **(reason_extra or {})},
        )
    finally:
        if claim is not None:
            claim.release()
    if result.won and reason_type == "user" and behavior == "allow":
        _autopilot_after_allow(result.request)
    return result


HOLDER_WAIT_SECONDS = 2.0


def _await_holder(store: ClaimStore, request_id: uuid.UUID | str) -> DecideResult | None:
    """The loser's answer once the claim holder's outcome is known; None if it never came.

    A held claim says who is deciding, not who won: the holder's own fence can still
    lose to a cancel or the deadline, which take no claim. So a loser waits (briefly:
    a holder commits in milliseconds) and names the real winner from the audit row.
    """
    deadline = time.monotonic() + min(HOLDER_WAIT_SECONDS, settings.GATEHOUSE_CLAIM_TTL_MS / 1000)
    released = False
    while True:
        request = PermissionRequest.objects.get(pk=request_id)
        if request.state != RequestState.PENDING:
            return DecideResult(False, request, selectors.decision_for(request))
        if released or time.monotonic() >= deadline:
            # Let go without deciding (its audit write failed), or never finished.
            return None
        released = _await_release(store, str(request_id), deadline)


def _await_release(store: ClaimStore, request_id: str, deadline: float) -> bool:
    """Whether the claim's holder let go before `deadline`.

    A holder lets go as its decision commits, a few milliseconds after it claimed, so
    the loser polls the claim store (far cheaper than the database) from 1 ms on and
    reads the row once, rather than re-reading the row every 20 ms.
    """
    pause = 0.001
    while time.monotonic() < deadline:
        if store.holder(request_id) is None:
            return True
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
    return False


def _decide_fenced(
    request_id: uuid.UUID | str,
    *,
    loaded: PermissionRequest | None,
    claim: Claim | None,
    behavior: str,
    surface: str,
    user: User | None,
    decided_by: str,
    message: str,
    updated_input: dict[str, Any] | None,
    remember: str,
    remember_hours: float | None,
    reason: dict[str, Any],
) -> DecideResult:
    try:
        if loaded is None:
            loaded = PermissionRequest.objects.select_related("agent").get(pk=request_id)
        with transaction.atomic():
            request = _fence(loaded, RequestState.DECIDED, before_deadline=True)
            if request is None:
                return _lost_or_overdue(request_id)
            if behavior == "allow" and remember != "once":
                reason["saved_rule"] = _remember(request, remember, remember_hours, user)
            if behavior == "deny" and not message:
                message = f"Denied by {decided_by} via {surface}. Do not retry this call; try another approach."
            if behavior == "deny" and reason["type"] == "user":
                reason.update(_autopilot_demote(request))
            decision = _append_decision(
                request,
                behavior=behavior,
                message=message,
                reason=reason,
                decided_by=decided_by,
                surface=surface,
                updated_input=updated_input,
                user=user,
            )
            events.announce_finished(request, decision)
    except DatabaseError as exc:
        log.error("audit write failed deciding %s: %s", request_id, exc)
        raise AuditUnavailable(AUDIT_UNAVAILABLE) from exc
    return DecideResult(True, request, decision)


def _lost_or_overdue(request_id: uuid.UUID | str) -> DecideResult:
    """A person's decision that lost: to an earlier outcome, or to the deadline it came after.

    A decision after `deadline_at` never counts, even before the sweeper's next pass:
    the request expires here (deny, reason `timeout`) and the late decider is told so.
    """
    current = PermissionRequest.objects.select_related("agent").get(pk=request_id)
    if current.state == RequestState.PENDING:
        expired = request_expire(request=current)
        return DecideResult(False, expired.request, expired.decision)
    return DecideResult(False, current, selectors.decision_for(current))


def _fence(request: PermissionRequest, new_state: str, *, before_deadline: bool = False) -> PermissionRequest | None:
    """Move a pending request to `new_state`; None if someone else got there first.

    - `request` as read before: only the conditional update decides, and what it
      changes (state, version, decided_at) is all that a pending request ever changes
      of what the audit row records, so the row need not be read again.
    - `before_deadline`: also None once `deadline_at` has passed (a person's decision).
    """
    if request.state != RequestState.PENDING:
        return None
    now = timezone.now()
    pending = PermissionRequest.objects.filter(pk=request.pk, state=RequestState.PENDING)
    if before_deadline:
        pending = pending.filter(Q(deadline_at__isnull=True) | Q(deadline_at__gt=now))
    updated = pending.update(state=new_state, version=F("version") + 1, decided_at=now)
    if updated != 1:
        return None
    fenced = copy.copy(request)  # the caller's object keeps saying what it read
    fenced.state = new_state
    fenced.version += 1
    fenced.decided_at = now
    return fenced


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
        surface="local" if "local" in reason else "agent",
    )


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
            fenced = _fence(request, state)
            if fenced is None:
                current = PermissionRequest.objects.get(pk=request.pk)
                return DecideResult(False, current, selectors.decision_for(current))
            decision = _append_decision(
                fenced, behavior="deny", message=message, reason=reason, decided_by=decided_by, surface=surface
            )
            events.announce_finished(fenced, decision)
    except DatabaseError as exc:
        raise AuditUnavailable(AUDIT_UNAVAILABLE) from exc
    return DecideResult(True, fenced, decision)


def request_record_result(*, request: PermissionRequest, ok: bool, output: Any = None, error: str = "") -> bool:
    """Record PostToolUse (ok) or PostToolUseFailure against the request; False if refused.

    - Only a call that may have run takes a result: one allowed, or withdrawn because it
      was answered locally. A denied, expired or pending request never shows as run.
    """
    result = {"ok": ok, "output": output} if ok else {"ok": False, "error": error}
    may_have_run = Q(state=RequestState.CANCELLED) | Q(state=RequestState.DECIDED, decision__behavior="allow")
    updated = PermissionRequest.objects.filter(may_have_run, pk=request.pk).update(
        result=result, result_at=timezone.now()
    )
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


# --- chat identities (appended by the dashboard) ------------------------------------------

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


# --- autopilot --------------------------------------------------------------------------

AUTOPILOT_LIMITS = {"approvals": (2, 100), "trial_hours": (1, 24 * 30), "window_days": (1, 365)}


def autopilot_configure(*, team: Team, enabled: bool, **limits: int | None) -> AutopilotSetting:
    """Turn a team's autopilot on or off; `approvals`, `trial_hours`, `window_days` as given."""
    setting, _ = AutopilotSetting.objects.get_or_create(team=team)
    setting.enabled = enabled
    for name, value in limits.items():
        if name not in AUTOPILOT_LIMITS:
            raise ServiceError(f"unknown autopilot setting {name!r}")
        low, high = AUTOPILOT_LIMITS[name]
        if value is not None and not low <= value <= high:
            raise ServiceError(f"{name} must be between {low} and {high}, not {value}")
        if value is not None:
            setattr(setting, name, value)
    setting.save()
    return setting


def _autopilot_demote(request: PermissionRequest) -> dict[str, Any]:
    """A person denied this call: delete every autopilot rule that would allow it.

    Runs inside the deny's transaction, so no later call meets the rule once the deny
    has committed. Returns what to add to the deny's audit reason.
    """
    rules = list(Rule.objects.filter(team_id=request.team_id, source=RuleSource.AUTOPILOT))
    if not rules:
        return {}
    doc = learning.request_engine_input(request)
    demoted = [r for r in rules if policy.learning.rule_decides(r.rule, "allow", doc)]
    Rule.objects.filter(pk__in=[r.pk for r in demoted]).delete()
    return {"demoted_autopilot": [r.rule for r in demoted]} if demoted else {}


def _autopilot_after_allow(request: PermissionRequest) -> None:
    # The person's allow has committed and been announced: a failure here may cost the
    # autopilot a promotion, never the decision, so it is logged and not raised.
    try:
        autopilot_consider(request=request)
    except DatabaseError as exc:
        log.error("autopilot could not consider request %s: %s", request.pk, exc)


def autopilot_consider(*, request: PermissionRequest) -> Rule | None:
    """After a person allowed this call, save its narrow pattern as an autopilot rule if earned.

    - Only for a team that turned the autopilot on; the rule lives `trial_hours`.
    - Earned: `approvals` allows of exactly this pattern from as many sessions, none
      destructive, no denial in the window that the rule would allow.
    - Never for a destructive call, and never when the rule would not decide the call
      itself: a protected path, or a deny or ask rule (a policySettings one reserving the
      call for a person) still wins over it, so such a pattern is never saved.
    """
    setting = AutopilotSetting.objects.filter(team_id=request.team_id, enabled=True).first()
    rule = _autopilot_pattern(request)
    if setting is None or rule is None:
        return None
    now = timezone.now()
    live = Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    if Rule.objects.filter(live, team_id=request.team_id, source=RuleSource.AUTOPILOT, rule=rule).exists():
        return None
    calls = learning.answered_calls(request.team_id, now - timedelta(days=setting.window_days), now)
    evidence = policy.learning.autopilot_ready(rule, calls, approvals=setting.approvals)
    if evidence is None or not _autopilot_decides(request, rule):
        return None
    until = now + timedelta(hours=setting.trial_hours)
    note = (
        f"Autopilot: {evidence.calls} approvals in {evidence.sessions} sessions by {evidence.people} "
        f"people, no denial; on trial until {until:%Y-%m-%d %H:%M} UTC."
    )
    return rule_create(
        rule=rule, behavior="allow", source=RuleSource.AUTOPILOT, team=request.team, expires_at=until, note=note
    )


def _autopilot_pattern(request: PermissionRequest) -> str | None:
    """The rule an "Always allow" grant of this call would save; None if it may not be saved."""
    evaluation = request.evaluation or {}
    answered = policy.learning.AnsweredCall(
        doc={"tool_name": request.tool_name, "tool_input": request.tool_input},
        answer="allow",
        session_id=request.session_id,
        person="",
        suggested_rules=tuple(evaluation.get("suggested_rules") or ()),
        destructive=bool(evaluation.get("destructive_warning")),
    )
    return policy.learning.allow_pattern(answered)


def _autopilot_decides(request: PermissionRequest, rule: str) -> bool:
    """Whether, with the team's rules plus `rule`, the call would be allowed by `rule` itself."""
    doc = learning.request_engine_input(request)
    compiled, _ = compiled_rules_for(request.agent, doc["session_id"], doc["cwd"])
    candidate = policy.compile_rules([{"rule": rule, "behavior": "allow", "source": RuleSource.AUTOPILOT}])
    verdict = policy.decide(doc, rules=compiled.merged(candidate))
    return verdict.behavior == "allow" and verdict.reason.get("source") == RuleSource.AUTOPILOT
