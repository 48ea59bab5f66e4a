"""Reads of permission requests and their decisions."""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from approvals import changes, permissions
from approvals.models import (
    Agent,
    AuditKind,
    Decision,
    Membership,
    PermissionRequest,
    RequestState,
    TeamSettings,
)
from approvals.written import JoinedRead, ModelColumns, Statement, column, run_together, table
from policy import grants


@dataclass(frozen=True)
class SubmitContext:
    """What a submit reads before the engine runs, in one statement (`submit_context`)."""

    replayed: bool  # a request with this `tool_use_id` exists: read it, it answers the call
    denial_state: dict[str, Any] | None  # the session's saved denial state; None when none is saved
    paused: bool  # a stop switch covers the agent: read it with `pause_for`
    rules_version: str  # see `rules_version`
    team_settings: TeamSettings  # see `team_settings`
    pending: int  # the agent's asks waiting for a person, counted up to `pending_limit`


# The team's settings, then what else a submit reads, in one statement, for the agent
# `gh_me` names (`{me}`: the agent by id, or by its token's digest). Without a session
# there is no denial state to read. The last five columns say whom and what the row was
# read for: rows read ahead of the call (with the agent's token) are used only for the
# very call they were read for (`submit_context`).
_SUBMIT_CONTEXT_SQL = """
SELECT {settings},
  (SELECT 1 FROM approvals_permissionrequest WHERE agent_id = gh_me.id AND tool_use_id = %s) AS gh_replayed,
  {denials} AS gh_denial_state,
  (SELECT 1 FROM approvals_pause WHERE team_id = gh_me.team_id AND (agent_id IS NULL OR agent_id = gh_me.id) LIMIT 1)
    AS gh_paused,
  (SELECT version FROM approvals_rulesversion WHERE team_id = gh_me.team_id) AS gh_rules_version,
  (SELECT count(*) FROM (SELECT 1 FROM approvals_permissionrequest
     WHERE agent_id = gh_me.id AND state = 'pending' LIMIT %s) AS gh_waiting) AS gh_pending,
  gh_me.id, gh_me.team_id, CAST(%s AS text), CAST(%s AS text), CAST(%s AS integer)
FROM ({me}) AS gh_me LEFT JOIN approvals_teamsettings AS s ON s.team_id = gh_me.team_id
"""
_SETTINGS = ModelColumns(TeamSettings, "s")
# The agent by id, or by its live token's digest (as `identities.agent_by_token_hash` reads it;
# should the two ever differ, a row read for another agent than the token's is read again).
_BY_ID = "SELECT CAST(%s AS bigint) AS id, CAST(%s AS bigint) AS team_id"
_BY_TOKEN = "SELECT id, team_id FROM approvals_agent WHERE token_hash = %s AND revoked_at IS NULL"  # noqa: S105


@functools.cache
def _submit_context_sql(vendor: str, with_session: bool, by_token: bool) -> str:
    denials = "(SELECT state FROM approvals_sessiondenials WHERE agent_id = gh_me.id AND session_id = %s)"
    return _SUBMIT_CONTEXT_SQL.format(
        settings=_SETTINGS.columns, denials=denials if with_session else "NULL", me=_BY_TOKEN if by_token else _BY_ID
    )


def submit_context_statement(
    *, tool_use_id: str, session_id: str, pending_limit: int, agent: Agent | None = None, token_digest: str = ""
) -> Statement:
    """`submit_context`'s one statement, for `agent`, or for the live agent whose token has
    `token_digest` (read with the token itself, before it is known good: `approvals.auth`)."""
    denials = [session_id] if session_id else []
    me: list[Any] = [agent.pk, agent.team_id] if agent is not None else [token_digest]
    params = [tool_use_id, *denials, pending_limit, tool_use_id, session_id, pending_limit, *me]
    return _submit_context_sql(connection.vendor, bool(session_id), agent is None), params


def submit_context(
    *,
    agent: Agent,
    tool_use_id: str,
    session_id: str,
    pending_limit: int,
    read_ahead: list[tuple[Any, ...]] | None = None,
) -> SubmitContext:
    """The replay check, denial state, stop switch, rules version, team settings and pending
    asks (counted up to `pending_limit`, on a partial index of pending requests) of one call.

    - One statement instead of five, and written out rather than built by the ORM: every
      auto-decided call pays it, and compiling those five reads as querysets took 1.3-1.6
      ms of CPU (of ~11 ms for a whole submit in process), this statement ~0.15 ms. The
      rare answers (a replay, a pause) are read in full by the caller only when they are
      there.
    - `read_ahead`: the rows of `submit_context_statement` sent with the agent's token
      read. They are used when they were read for this very agent (its id and team) and
      call (`tool_use_id`, `session_id`, `pending_limit`); otherwise the statement is sent
      now, so a body read one way ahead of the call and validated another never decides it.
    """
    key = (agent.pk, agent.team_id, tool_use_id, session_id, pending_limit)
    rows = read_ahead if read_ahead and len(read_ahead) == 1 and tuple(read_ahead[0][-5:]) == key else None
    if rows is None:
        statement = submit_context_statement(
            agent=agent, tool_use_id=tool_use_id, session_id=session_id, pending_limit=pending_limit
        )
        [rows] = run_together([statement])
    # The settings' columns become a TeamSettings (through the database's converters); the
    # others come back as the database sends them.
    [(settings, (replayed, denial_state, paused, rules_version, pending, *_))] = _SETTINGS.rows(rows)
    if isinstance(denial_state, str):  # JSON comes back as text on both databases
        denial_state = json.loads(denial_state)
    return SubmitContext(
        replayed=bool(replayed),
        denial_state=denial_state,
        paused=bool(paused),
        rules_version=rules_version or "",
        team_settings=settings if settings is not None else TeamSettings(team_id=agent.team_id),
        pending=int(pending),
    )


def request_by_tool_use_id(*, agent: Agent, tool_use_id: str) -> PermissionRequest | None:
    return PermissionRequest.objects.filter(agent=agent, tool_use_id=tool_use_id).first()


def request_get(request_id: Any) -> PermissionRequest | None:
    """The request with this id, or None; a malformed id is simply not found.

    - A database error is not caught here: it reaches the 503 handler.
    """
    try:
        pk = request_id if isinstance(request_id, uuid.UUID) else uuid.UUID(str(request_id))
    except ValueError:
        return None
    return _REQUEST.first(pk)


# `select_related("agent", "team")` by id, written out once per process (approvals.written):
# every decision, from every surface, starts with this read.
_REQUEST = JoinedRead(PermissionRequest, relations=("agent", "team"), match=("id",))


def request_and_members_statements(request_id: uuid.UUID) -> list[Statement]:
    """What a person's decision over the API starts with (`request_and_members`): the
    request, as `request_get` reads it, and its team's memberships. Neither depends on who
    asks, so they can go with the caller's token read (`approvals.auth`)."""
    pk = PermissionRequest._meta.pk
    assert pk is not None
    return [
        _REQUEST.first_statement(request_id),
        (_members_sql(connection.vendor), [pk.get_db_prep_value(request_id, connection)]),
    ]


def request_and_members(
    request_id: uuid.UUID, rows: list[list[tuple[Any, ...]]] | None = None
) -> tuple[PermissionRequest | None, dict[int, str]]:
    """The request (None if there is none) and its team's members (user id -> role), from
    `rows` its statements returned, or read now in one round trip."""
    found, members = rows if rows is not None else run_together(request_and_members_statements(request_id))
    request = next(iter(_REQUEST.instances(found)), None)
    return request, ({int(user): str(role) for user, role in members} if request is not None else {})


@functools.cache
def _members_sql(vendor: str) -> str:
    # Every name comes from the models, quoted; the value is a parameter.
    request_team, request_id = column(PermissionRequest, "team"), column(PermissionRequest, "id")
    return (
        f"SELECT {column(Membership, 'user')}, {column(Membership, 'role')} FROM {table(Membership)}"  # noqa: S608
        f" WHERE {column(Membership, 'team')} ="
        f" (SELECT {request_team} FROM {table(PermissionRequest)} WHERE {request_id} = %s)"
    )


def request_with_decision(request_id: uuid.UUID | str) -> PermissionRequest | None:
    """The request with its agent, team and (once decided) decision, in one statement; None if
    there is none. The decision is `joined_decision(request)`."""
    return REQUEST_WITH_DECISION.first(request_id)


# `select_related("agent", "team", "decision")` by id, written out once per process: what a
# claim's loser reads of the winner's outcome, and what the dashboards' cards read
# (relay.selectors, many ids at once).
REQUEST_WITH_DECISION = JoinedRead(PermissionRequest, relations=("agent", "team", "decision"), match=("id",))


def request_matching(*, agent: Agent, session_id: str, tool_name: str, input_hash: str) -> PermissionRequest | None:
    """The newest request of the same session, tool and input (PermissionRequest matching)."""
    return (
        PermissionRequest.objects.filter(agent=agent, session_id=session_id, tool_name=tool_name, input_hash=input_hash)
        .order_by("-created_at")
        .first()
    )


def prompted_request_not_run(
    *, agent: Agent, session_id: str, tool_name: str, input_hash: str
) -> PermissionRequest | None:
    """The newest request a Claude Code prompt opened for this call that has not run yet.

    - Such a request carries a generated `gh_` id (a PermissionRequest has no
      `tool_use_id`), so a PostToolUse finds it by session, tool and input instead.
    """
    return (
        PermissionRequest.objects.filter(
            agent=agent,
            session_id=session_id,
            tool_name=tool_name,
            input_hash=input_hash,
            tool_use_id__startswith="gh_",
            result_at__isnull=True,
        )
        .order_by("-created_at")
        .first()
    )


def session_gated_before_use(*, agent: Agent, session_id: str) -> bool:
    """Whether this session's calls reach Gatehouse before they run (a PreToolUse request).

    - Requests opened by a PermissionRequest hook carry a generated `gh_` id, never
      Claude Code's own `tool_use_id`, so they do not count.
    """
    if not session_id:
        return False
    requests = PermissionRequest.objects.filter(agent=agent, session_id=session_id)
    return requests.exclude(tool_use_id__startswith="gh_").exists()


def grant_rule_for(request: PermissionRequest) -> str | None:
    """The rule "Allow for session" / "Always allow" saves for this request; None: once only.

    - Never wider than the call (`policy.grants`); every surface shows it before the tap.
    """
    evaluation = request.evaluation or {}
    if evaluation.get("quorum"):
        return None  # a call that needs people's approvals is allowed once, by each
    suggestions = [str(rule) for rule in evaluation.get("suggested_rules") or []]
    tool_input = request.tool_input if isinstance(request.tool_input, dict) else {}
    destructive = bool(evaluation.get("destructive_warning"))
    return grants.grant_rule(request.tool_name, tool_input, suggestions, destructive=destructive)


def same_call_key(request: PermissionRequest) -> str:
    """What makes pending calls identical for a batch decision: agent, session, cwd, tool, input.

    - The input is compared by `input_hash` (SHA-256 of the canonical input), so two
      calls that differ in one character are never decided together.
    """
    parts = [str(request.agent_id), request.session_id, request.cwd, request.tool_name, request.input_hash]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def decision_for(request: PermissionRequest) -> Decision | None:
    """The request's outcome (its `decision` audit row); None while pending."""
    return Decision.objects.filter(request_id=request.pk, kind=AuditKind.DECISION).first()


def joined_decision(request: PermissionRequest) -> Decision | None:
    """The decision read with the request (`select_related("decision")`); None while pending."""
    try:
        return request.decision
    except Decision.DoesNotExist:
        return None


def requests_visible_to(user: User | AnonymousUser) -> QuerySet[PermissionRequest]:
    teams = permissions.team_ids_for(user)
    queryset = PermissionRequest.objects.select_related("agent", "team", "decision")
    return queryset if teams is None else queryset.filter(team_id__in=teams)


def pending_requests(user: User | AnonymousUser) -> QuerySet[PermissionRequest]:
    return requests_visible_to(user).filter(state=RequestState.PENDING).order_by("created_at")


def pending_cards(user: User | AnonymousUser) -> list[PermissionRequest]:
    """`pending_requests`, each with what its card says "since last allowed"
    (`last_allowed_like`) read with the others: one round trip for every card on
    PostgreSQL, where each card's was its own."""
    requests = list(pending_requests(user))
    allowed = run_together([allowed_like_statement(request.pk) for request in requests])
    for request, rows in zip(requests, allowed, strict=True):
        keep_allowed_like(request, rows)
    return requests


def requests_filtered(
    user: User | AnonymousUser,
    *,
    state: str | None = None,
    agent: str | None = None,
    session: str | None = None,
) -> QuerySet[PermissionRequest]:
    """The API's request list: visible to `user`, filtered, newest first."""
    rows = requests_visible_to(user)
    if state:
        rows = rows.filter(state=state)
    if agent:
        rows = rows.filter(agent__name=agent)
    if session:
        rows = rows.filter(session_id=session)
    return rows.order_by("-created_at", "-pk")


def pending_for_agent(agent: Agent) -> QuerySet[PermissionRequest]:
    return PermissionRequest.objects.filter(agent=agent, state=RequestState.PENDING)


def overdue_requests(limit: int = 100) -> QuerySet[PermissionRequest]:
    return (
        PermissionRequest.objects.select_related("agent")
        .filter(state=RequestState.PENDING, deadline_at__lte=timezone.now())
        .order_by("deadline_at")[:limit]
    )


def ladder_steps_due(limit: int = 100) -> list[tuple[PermissionRequest, str]]:
    """Pending requests whose reminder or escalation is due, each with the step's kind."""
    now = timezone.now()
    pending = PermissionRequest.objects.select_related("agent").filter(state=RequestState.PENDING)
    reminders = pending.filter(remind_at__lte=now).order_by("remind_at")[:limit]
    escalations = pending.filter(escalate_at__lte=now).order_by("escalate_at")[:limit]
    return [(r, str(AuditKind.REMINDER)) for r in reminders] + [(r, str(AuditKind.ESCALATION)) for r in escalations]


# How many finished requests the queue page shows under "Recently decided": on load, and
# as pushes keep the list current (static/queue.js drops the older ones; the relay sends a
# dashboard no more of a tick's cards than the list keeps, relay.fanout.shown_of).
RECENT_FINISHED = 5


def recently_finished(user: User | AnonymousUser, limit: int = RECENT_FINISHED) -> QuerySet[PermissionRequest]:
    return requests_visible_to(user).exclude(state=RequestState.PENDING).order_by("-decided_at")[:limit]


def request_timeline(request: PermissionRequest, decision: Decision | None) -> list[dict[str, Any]]:
    """What happened to a request, in order: asked, notified, claimed, decided, autopilot, ran.

    - Each step is what the database recorded, never a guess: "notified" lists the chat
      messages that announced the ask (open dashboards are pushed as it commits);
      "claimed" is the race's fence (the first answer moving the row); "ran" is the
      agent's PostToolUse or PostToolUseFailure result; "autopilot" is the trial rule the
      autopilot saved after this allow.
    - A step with no moment (`at` None) says why nothing was recorded.
    """
    steps: list[dict[str, Any]] = [
        {"step": "asked", "at": request.created_at, "detail": f"by {request.agent.name}"},
    ]
    # The relay's chat messages, read through the reverse relation (approvals never imports relay).
    messages = getattr(request, "surface_messages", None)
    for message in messages.order_by("created_at") if messages is not None else []:
        steps.append({"step": "notified", "at": message.created_at, "detail": f"{message.surface} message"})
    # Quorum votes and escalation ladder steps: audit rows of their own, before the decision.
    on_the_way = (
        Decision.objects.filter(request_id=request.pk)
        .exclude(kind__in=[AuditKind.DECISION, AuditKind.AUTOPILOT])
        .order_by("id")
    )
    for kind, decided_by, surface, at, reason in on_the_way.values_list(
        "kind", "decided_by", "surface", "created_at", "reason"
    ):
        detail = {
            AuditKind.VOTE: f"{decided_by} via {surface} ({reason.get('vote')} of {reason.get('of')})",
            AuditKind.REMINDER: "the same people, still waiting",
            AuditKind.ESCALATION: f"to the {reason.get('group') or 'on-call'} group",
        }.get(AuditKind(kind), kind)
        step = {AuditKind.VOTE: "approved", AuditKind.REMINDER: "reminded", AuditKind.ESCALATION: "escalated"}
        steps.append({"step": step.get(AuditKind(kind), kind), "at": at, "detail": detail})
    if request.state == RequestState.PENDING:
        steps.append({"step": "waiting", "at": None, "detail": "no one has answered yet"})
        return steps
    if decision is not None:
        by = f"{decision.decided_by} via {decision.surface}"
        if decision.reason_type in ("user", "timeout", "cancelled") and request.decided_at is not None:
            steps.append({"step": "claimed", "at": request.decided_at, "detail": by})
        steps.append({"step": "decided", "at": decision.created_at, "detail": f"{decision.behavior} by {by}"})
    # After a person's allow: the autopilot saving its trial rule (an audit row of its own).
    promotions = Decision.objects.filter(request_id=request.pk, kind=AuditKind.AUTOPILOT).order_by("id")
    for at, message in promotions.values_list("created_at", "message"):
        steps.append({"step": "autopilot", "at": at, "detail": message.removeprefix("autopilot ")})
    steps.append(_ran(request, decision))
    return steps


def _ran(request: PermissionRequest, decision: Decision | None) -> dict[str, Any]:
    if request.result_at is not None:
        ok = isinstance(request.result, dict) and request.result.get("ok") is True
        return {"step": "ran", "at": request.result_at, "detail": "succeeded" if ok else "failed"}
    if (decision is not None and decision.behavior == "allow") or request.state == RequestState.CANCELLED:
        return {"step": "ran", "at": None, "detail": "no result reported (the agent reports one after the call runs)"}
    return {"step": "ran", "at": None, "detail": "did not run: denied"}


# How far back "the last time a person allowed a call like this" looks: the newest
# people's allows of this agent and tool, the first of them like it.
LIKE_LOOKBACK = 50

# Where `requests_for_cards` leaves the answer it read with the request (`allowed_like_statement`).
_ALLOWED_LIKE = "_gh_allowed_like"


def last_allowed_like(request: PermissionRequest) -> Decision | None:
    """The newest person's allow of a call like `request` (same agent, tool and
    `likeness`), with its request; one statement, or none when the request was read with it.

    - The stored likeness only finds it: the two calls' own tool and input (what the audit
      chain covers) must say they are alike, else there is none to compare with.
    """
    if _ALLOWED_LIKE in request.__dict__:
        found: Decision | None = request.__dict__[_ALLOWED_LIKE]
    else:
        found = allowed_like(run_together([allowed_like_statement(request.pk)])[0])
    if found is None:
        return None
    before = found.request
    alike = changes.likeness_key(before.tool_name, before.tool_input) == changes.likeness_key(
        request.tool_name, request.tool_input
    )
    return found if alike else None


def allowed_like_statement(request_id: uuid.UUID) -> Statement:
    """`last_allowed_like`'s statement for the request of this id, to send with others
    (`run_together`); read its rows with `allowed_like`."""
    request_id = PermissionRequest._meta.pk.get_db_prep_value(request_id, connection)
    params = [request_id, request_id, request_id, LIKE_LOOKBACK, request_id]
    return _ALLOWED.where_statement(_allowed_like_sql(connection.vendor), params)


def allowed_like(rows: list[tuple[Any, ...]]) -> Decision | None:
    """The allow `allowed_like_statement`'s rows hold, with its request; None for none."""
    return next(iter(_ALLOWED.instances(rows)), None)


def keep_allowed_like(request: PermissionRequest, rows: list[tuple[Any, ...]]) -> None:
    """Keep the answer read with `request` (`allowed_like_statement`): `last_allowed_like`
    then reads nothing."""
    request.__dict__[_ALLOWED_LIKE] = allowed_like(rows)


@functools.cache
def _allowed_like_sql(vendor: str) -> str:
    """The allow's condition (t0: the allow). One id, worked out before the allow is read
    (PostgreSQL: an InitPlan, then the allow by its key): the request's agent, tool and
    likeness, each read once; `decision_people_allows` walked newest first, stopping after
    LIKE_LOOKBACK rows; the newest of those whose request is alike."""
    d, r = Decision, PermissionRequest

    def of_request(name: str) -> str:
        return f"(SELECT {column(r, name)} FROM {table(r)} WHERE {column(r, 'id')} = %s)"  # noqa: S608

    # Every name comes from the models, quoted; the values are parameters.
    recent = (
        f"SELECT {column(d, 'id')}, {column(d, 'request')}, {column(d, 'created_at')} FROM {table(d)}"  # noqa: S608
        f" WHERE {column(d, 'agent')} = {of_request('agent')} AND {column(d, 'tool_name')} = {of_request('tool_name')}"
        f" AND {column(d, 'behavior')} = 'allow' AND {column(d, 'reason_type')} = 'user'"
        f" AND {column(d, 'request')} <> %s ORDER BY {column(d, 'created_at')} DESC LIMIT %s"
    )
    return (
        f"t0.{column(d, 'id')} = (SELECT gh_recent.{column(d, 'id')} FROM ({recent}) gh_recent"  # noqa: S608
        f" JOIN {table(r)} gh_like ON gh_like.{column(r, 'id')} = gh_recent.{column(d, 'request')}"
        f" WHERE gh_like.{column(r, 'likeness')} = {of_request('likeness')}"
        f" ORDER BY gh_recent.{column(d, 'created_at')} DESC LIMIT 1)"
    )


# The allow a card compares with, with its request.
_ALLOWED = JoinedRead(Decision, relations=("request",), match=())
