"""`POST /hooks/claude-code`: Claude Code's hook JSON in, the exact hook stdout JSON out.

It is the whole Claude Code integration behind one URL, so `curl` alone can be the hook
command, and `python -m agent.hook` is a thin, fast client of it.

- `PreToolUse` submits the call (its `tool_use_id` is the idempotency key) and answers
  `permissionDecision` allow or deny. An engine "ask" waits for the remote race by
  default: the product's point is approving from elsewhere, and answering "ask" would
  make Claude Code prompt locally (or, headless, deny). `?ask=local` answers "ask" at
  once instead and leaves the request pending for a PermissionRequest hook to pick up.
- `PermissionRequest` carries no `tool_use_id`: it is matched to the PreToolUse request
  of the same session, tool and input hash, so one tool call stays one request and one
  audit row. Its `permission_suggestions` are stored for the approver.
- `?withdraw=1` with the same body cancels the call's pending request ("answered
  locally"): what the hook command does when Claude Code kills it.
- `PostToolUse` / `PostToolUseFailure` record the result against the request with that
  `tool_use_id` (a request still pending then was answered locally: it is withdrawn).

Waiting: `?wait=S` bounds the wait; a request still pending then answers 202 with
`{"gatehouse": {"id", "status": "pending"}}` for the caller to post again, unless
`?on_timeout=deny|ask` is also given, which makes this the final wait (never `allow`:
a deadline is the server's to decide, and it denies). Without
`?wait` the endpoint waits up to `GATEHOUSE_HOOK_WAIT` (default: the ask deadline) and
then applies `on_timeout` (default deny), which is what a plain curl hook needs.

This is a plain Django view rather than a DRF APIView: its errors are hook output, not
DRF's. Like every view it runs on the request's own worker thread; a call the server
decides is answered from there, and only an ask that waits goes to the event loop
(`approvals.waiting`, through `async_to_sync`), with the thread's database connection
given back first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from approvals import selectors, services, strict_json
from approvals.api.errors import DATABASE_UNAVAILABLE
from approvals.audit import input_hash
from approvals.auth import AgentPrincipal, authenticate_token_with, bearer_token, body_ahead
from approvals.calls import CALL_ID_MAX_CHARS, CallInvalid, parse_call, parse_call_context
from approvals.middleware import release_connections
from approvals.models import Agent, Context, Decision, Mode, PermissionRequest, RequestState
from approvals.waiting import wait_for_decision
from approvals.written import Statement
from policy.facts import FactsError, facts_to_dict, parse_facts
from policy.rules.parse import RuleSyntaxError, parse_rule

log = logging.getLogger(__name__)

PRE_TOOL_USE = "PreToolUse"
PERMISSION_REQUEST = "PermissionRequest"
POST_TOOL_USE = "PostToolUse"
POST_TOOL_USE_FAILURE = "PostToolUseFailure"
# Claude Code's auto mode refused the call itself (its classifier): recorded, not decided.
PERMISSION_DENIED = "PermissionDenied"
DECIDING_EVENTS = (PRE_TOOL_USE, PERMISSION_REQUEST)
RECORDING_EVENTS = (POST_TOOL_USE, POST_TOOL_USE_FAILURE, PERMISSION_DENIED)
# What the caller may ask for when its wait ends. Never "allow": what a deadline decides
# is the server's (a deny), and an agent's own query must not approve its own ask.
# "defer" (PreToolUse): park the call in a headless session (`claude -p`), which stops with
# it pending; the ask stays open until the team's deferred deadline, and `claude -p --resume
# <session>` asks again and gets the person's answer.
ON_TIMEOUT_CHOICES = ("deny", "ask", "defer")
# Claude Code's own dialog won the race (it sends the hook SIGTERM), or the call ran
# without our answer: what every surface shows for the withdrawn ask.
ANSWERED_LOCALLY = "answered at the terminal"
DEFERRED_REASON = (
    "Waiting for a person in Gatehouse. Resume this session (claude -p --resume <session>) for their answer."
)
ANSWER_HEADER = "Gatehouse-Answer-For"
# A PermissionRequest reuses a decided PreToolUse request only while that call has not
# run yet (no PostToolUse recorded) and only this soon after it; older matches are an
# earlier call with the same input, which deserves its own request.
MATCH_WINDOW = timedelta(minutes=15)


class HookInputError(ValueError):
    """The body is not a hook input we can act on; the message says how to fix it."""


@dataclass(frozen=True)
class HookCall:
    event: str
    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str
    session_id: str
    cwd: str
    transcript_path: str
    permission_mode: str
    permission_suggestions: list[Any] = field(default_factory=list)
    tool_response: Any = None
    error: str = ""
    facts: dict[str, Any] | None = None
    call_context: dict[str, str] | None = None
    # PermissionDenied: why Claude Code refused the call.
    denied_reason: str = ""

    def submission(self, context: str) -> dict[str, Any]:
        """The `call` that `services.request_submit` takes."""
        return {
            "tool_name": self.tool_name,
            "tool_input": self.tool_input,
            "tool_use_id": self.tool_use_id,
            "session_id": self.session_id,
            "cwd": self.cwd,
            "permission_mode": self.permission_mode,
            "context": context,
            "facts": self.facts,
            "transcript_path": self.transcript_path,
            "permission_suggestions": self.permission_suggestions,
            "call_context": self.call_context,
        }


@dataclass(frozen=True)
class HookOptions:
    wait: float | None
    on_timeout: str | None
    ask_locally: bool
    context: str
    # Withdraw the call's pending request instead of deciding it (the hook was killed).
    withdraw: bool = False


@dataclass(frozen=True)
class Outcome:
    """Where a call stands: decided (with its audit row), pending, or withdrawn."""

    request: PermissionRequest | None
    decision: Decision | None
    # The request was withdrawn so that Claude Code's own prompt answers it.
    hand_to_claude: bool = False
    # Parked: the headless session stops with the call pending, and resumes for the answer.
    deferred: bool = False


# --- parsing ----------------------------------------------------------------------------


def _text(body: dict[str, Any], key: str, *, limit: int, required: bool = False) -> str:
    value = body.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise HookInputError(f"{key} must be a string")
    if required and not value:
        raise HookInputError(f"{key} is required for {body.get('hook_event_name')}")
    if len(value) > limit:
        raise HookInputError(f"{key} is longer than {limit} characters")
    if "\x00" in value:
        raise HookInputError(f"{key} contains a NUL character, which cannot be stored")
    return value


def parse_hook_input(body: Any) -> HookCall | None:
    """Read Claude Code's hook input strictly; None for an event Gatehouse does not handle.

    - Unknown fields are ignored (Claude Code adds new ones, e.g. `prompt_id`).
    """
    if not isinstance(body, dict):
        raise HookInputError("the body must be a JSON object: Claude Code's hook input")
    event = body.get("hook_event_name")
    if not isinstance(event, str) or not event:
        raise HookInputError("hook_event_name is required (PreToolUse, PermissionRequest, PostToolUse, ...)")
    if event not in DECIDING_EVENTS + RECORDING_EVENTS:
        return None
    tool_input = body.get("tool_input", {})
    if not isinstance(tool_input, dict):
        raise HookInputError("tool_input must be a JSON object")
    suggestions = body.get("permission_suggestions") or []
    if not isinstance(suggestions, list):
        raise HookInputError("permission_suggestions must be a list")
    mode = body.get("permission_mode") or Mode.DEFAULT
    error = body.get("error", "")
    call = HookCall(
        event=event,
        tool_name=_text(body, "tool_name", limit=200, required=True),
        tool_input=tool_input,
        tool_use_id=_text(body, "tool_use_id", limit=CALL_ID_MAX_CHARS, required=event != PERMISSION_REQUEST),
        session_id=_text(body, "session_id", limit=CALL_ID_MAX_CHARS),
        cwd=_text(body, "cwd", limit=4096),
        transcript_path=_text(body, "transcript_path", limit=4096),
        # A mode newer than this server gets the strict default rather than an error.
        permission_mode=mode if mode in Mode.values else Mode.DEFAULT,
        permission_suggestions=suggestions,
        tool_response=body.get("tool_response"),
        error=error if isinstance(error, str) else json.dumps(error),
        facts=_facts(body.get("facts")),
        call_context=_call_context(body),
        denied_reason=_text(body, "reason", limit=10_000) if event == PERMISSION_DENIED else "",
    )
    if event in DECIDING_EVENTS or event == PERMISSION_DENIED:
        # What is submitted (or, for PermissionDenied, recorded as a request of its own)
        # meets the same spec as a call from the API or the socket.
        try:
            parse_call(call.submission(Context.INTERACTIVE))
        except CallInvalid as exc:
            raise HookInputError(str(exc)) from None
    return call


def _call_context(body: dict[str, Any]) -> dict[str, str] | None:
    """Claude Code's `prompt_id`, `agent_id`, `agent_type` and `effort` (2.1.332 sends
    `{"level": "medium"}`), and the `user_prompt` Gatehouse's hook adds when opted in."""
    effort = body.get("effort")
    if isinstance(effort, dict):
        effort = effort.get("level")
    raw = {
        "prompt_id": body.get("prompt_id"),
        "agent_id": body.get("agent_id"),
        "agent_type": body.get("agent_type"),
        "effort": effort,
        "prompt": body.get("user_prompt"),
    }
    try:
        return parse_call_context({key: value for key, value in raw.items() if value is not None})
    except ValueError as exc:
        raise HookInputError(str(exc)) from None


def _facts(value: Any) -> dict[str, Any] | None:
    """The agent's facts (added by Gatehouse's hook command), checked strictly; None if absent."""
    if value is None:
        return None
    try:
        return facts_to_dict(parse_facts(value))
    except FactsError as exc:
        raise HookInputError(str(exc)) from None


def parse_options(query: Any) -> HookOptions:
    wait: float | None = None
    raw_wait = query.get("wait")
    if raw_wait not in (None, ""):
        try:
            wait = float(raw_wait)
        except ValueError:
            raise HookInputError("wait must be a number of seconds") from None
        if not math.isfinite(wait) or wait < 0:
            raise HookInputError("wait must be a number of seconds, 0 or more")
        wait = min(wait, float(settings.GATEHOUSE_MAX_WAIT))
    on_timeout = query.get("on_timeout") or None
    if on_timeout is not None and on_timeout not in ON_TIMEOUT_CHOICES:
        raise HookInputError("on_timeout must be deny, ask or defer: a deadline never allows a call")
    ask = query.get("ask") or "remote"
    if ask not in ("remote", "local"):
        raise HookInputError("ask must be remote or local")
    context = query.get("context") or Context.INTERACTIVE
    if context not in Context.values:
        raise HookInputError(f"context must be one of {', '.join(Context.values)}")
    withdraw = query.get("withdraw") in ("1", "true")
    return HookOptions(wait=wait, on_timeout=on_timeout, ask_locally=ask == "local", context=context, withdraw=withdraw)


# --- rendering: the exact stdout Claude Code honours ------------------------------------


def _reason_text(decision: Decision) -> str:
    if decision.message:
        return decision.message
    verb = "Allowed" if decision.behavior == "allow" else "Denied"
    return f"{verb} by {decision.decided_by} via {decision.surface} (Gatehouse)"


def render(event: str, outcome: Outcome) -> dict[str, Any]:
    """Claude Code's hook output for a settled outcome; `{}` means no decision."""
    decision = outcome.decision
    if outcome.deferred:
        return _pre_tool_use("defer", DEFERRED_REASON)
    if outcome.hand_to_claude:
        if event == PRE_TOOL_USE:
            reason = "Gatehouse got no answer in time; Claude Code asks locally."
            return _pre_tool_use("ask", reason)
        return {}
    if decision is None or (outcome.request is not None and outcome.request.state == RequestState.CANCELLED):
        return {}
    updated = decision.updated_input if isinstance(decision.updated_input, dict) else None
    # "Deny and stop": Claude Code ends the turn instead of letting the model try again.
    stops = (
        decision.behavior == "deny" and isinstance(decision.reason, dict) and decision.reason.get("interrupt") is True
    )
    if event == PRE_TOOL_USE:
        output = _pre_tool_use(decision.behavior, _reason_text(decision), updated)
        if stops:
            output.update({"continue": False, "stopReason": _reason_text(decision)})
        return output
    body: dict[str, Any] = {"behavior": decision.behavior}
    if decision.behavior == "allow":
        if updated is not None:
            body["updatedInput"] = updated
        granted = granted_permissions(decision)
        if granted:
            body["updatedPermissions"] = granted
    else:
        body["message"] = _reason_text(decision)
        if stops:
            body["interrupt"] = True
    return {"hookSpecificOutput": {"hookEventName": PERMISSION_REQUEST, "decision": body}}


def granted_permissions(decision: Decision) -> list[dict[str, Any]]:
    """What Claude Code should keep of a grant a person saved ("Allow for session", "Always allow").

    Only the rule Gatehouse saved — never wider than the call (`policy.grants`) — as one
    `addRules` entry, so Claude Code stops asking for the same call too. Whatever else
    the prompt's `permission_suggestions` offered (a mode change, a new directory, a
    wider rule) is never sent: a person widens Claude Code's settings at the terminal.
    """
    reason = decision.reason if isinstance(decision.reason, dict) else {}
    text, destination = reason.get("saved_rule"), reason.get("saved_for")
    if not isinstance(text, str) or destination not in ("session", "localSettings"):
        return []
    try:
        rule = parse_rule(text)
    except RuleSyntaxError:  # a rule Gatehouse saved always parses; if not, Claude Code keeps nothing
        return []
    entry: dict[str, str] = {"toolName": rule.tool_name}
    if rule.content is not None:
        entry["ruleContent"] = rule.content
    return [{"type": "addRules", "rules": [entry], "behavior": "allow", "destination": destination}]


def _pre_tool_use(behavior: str, reason: str, updated: dict[str, Any] | None = None) -> dict[str, Any]:
    output: dict[str, Any] = {
        "hookEventName": PRE_TOOL_USE,
        "permissionDecision": behavior,
        "permissionDecisionReason": reason,
    }
    if updated is not None:
        output["updatedInput"] = updated
    return {"hookSpecificOutput": output}


def render_failure(event: str, message: str) -> dict[str, Any]:
    """Fail closed: a deny Claude Code honours, for when no decision could be made."""
    if event == PRE_TOOL_USE:
        return _pre_tool_use("deny", message)
    if event == PERMISSION_REQUEST:
        decision = {"behavior": "deny", "message": message}
        return {"hookSpecificOutput": {"hookEventName": PERMISSION_REQUEST, "decision": decision}}
    return {}


def pending_body(request: PermissionRequest) -> dict[str, Any]:
    return {
        "gatehouse": {
            "id": str(request.pk),
            "status": "pending",
            "deadline_at": request.deadline_at.isoformat() if request.deadline_at else None,
        }
    }


# --- the work (synchronous, database) ---------------------------------------------------


def _usable_match(request: PermissionRequest | None) -> bool:
    if request is None:
        return False
    if request.state == RequestState.PENDING:
        return True
    return request.result_at is None and timezone.now() - request.created_at < MATCH_WINDOW


def open_call(
    agent: Agent, call: HookCall, options: HookOptions, read_ahead: list[tuple[Any, ...]] | None = None
) -> Outcome:
    """Submit the call, or find the request it already is; never a second request.

    - `read_ahead`: a PreToolUse call's context, read with the agent's token (`_reads_ahead`).
    """
    if call.event == PERMISSION_REQUEST:
        return _open_permission_request(agent, call, options)
    result = services.request_submit(agent=agent, call=call.submission(options.context), read_ahead=read_ahead)
    return Outcome(result.request, result.decision)


def _open_permission_request(agent: Agent, call: HookCall, options: HookOptions) -> Outcome:
    """Join the PreToolUse request this prompt is about, or open a person's ask.

    - Pending: the same request (one tool call, one audit row, one answer).
    - Already allowed: Claude Code still asks, so its safety floor speaks (a critical
      path, a protected directory, its own ask rule). That is a new ask for a person;
      the earlier allow, a rule, a mode or a classifier never answers it.
    """
    match = selectors.request_matching(
        agent=agent, session_id=call.session_id, tool_name=call.tool_name, input_hash=input_hash(call.tool_input)
    )
    if match is not None and _usable_match(match):
        if _answers_the_prompt(match, call):
            return Outcome(match, selectors.decision_for(match))
        return _submit(agent, call, options, safety_floor={"follows": str(match.pk)})
    if selectors.session_gated_before_use(agent=agent, session_id=call.session_id):
        # Gatehouse answered this session's PreToolUse calls, so a prompt now follows one
        # of its allows (its input rewritten, or matched no longer): the floor again.
        return _submit(agent, call, options, safety_floor={"follows": None})
    return _submit(agent, call, options)


def _answers_the_prompt(match: PermissionRequest, call: HookCall) -> bool:
    """Whether the matched request's outcome is the answer to Claude Code's prompt.

    - Pending: the prompt joins it (one tool call, one request, one audit row).
    - Decided after the prompt joined it (the hook's re-poll), denied, or withdrawn: yes.
    - Allowed before any prompt (a rule, a mode, a classifier, a person's PreToolUse
      answer): no, Claude Code asks anew.
    """
    if match.state == RequestState.PENDING and services.request_join_prompt(
        request=match, suggestions=call.permission_suggestions
    ):
        return True
    match.refresh_from_db()
    if match.evaluation.get("permission_prompt"):
        return True
    decision = selectors.decision_for(match)
    return decision is None or decision.behavior != "allow"


def _submit(agent: Agent, call: HookCall, options: HookOptions, **extra: Any) -> Outcome:
    """A new request opened by Claude Code's prompt (its own answer when re-polled)."""
    submission = {**call.submission(options.context), "permission_prompt": True, **extra}
    result = services.request_submit(agent=agent, call=submission)
    return Outcome(result.request, result.decision)


def settle(request: PermissionRequest, on_timeout: str | None, event: str = PRE_TOOL_USE) -> Outcome:
    """After the wait: expire past the deadline, apply `on_timeout`, or stay pending."""
    request.refresh_from_db()
    if request.state != RequestState.PENDING:
        return Outcome(request, selectors.decision_for(request))
    if request.deadline_at is not None and request.deadline_at <= timezone.now():
        result = services.request_expire(request=request)
    elif on_timeout is None:
        return Outcome(request, None)
    elif on_timeout == "defer" and event == PRE_TOOL_USE:
        if services.request_defer(request=request):
            return Outcome(request, None, deferred=True)
        request.refresh_from_db()
        return Outcome(request, selectors.decision_for(request))
    elif on_timeout in ("deny", "defer"):  # a PermissionRequest cannot be deferred
        result = services.request_expire(request=request)
    else:
        result = services.request_cancel(request=request, reason="no answer in time, left to Claude Code's own prompt")
        if result.won:
            return Outcome(result.request, result.decision, hand_to_claude=True)
    request.refresh_from_db()
    return Outcome(request, result.decision or selectors.decision_for(request))


def withdraw_call(agent: Agent, call: HookCall) -> None:
    """Cancel the call's pending request: Claude Code answered it locally and killed the hook."""
    if call.tool_use_id:
        request = selectors.request_by_tool_use_id(agent=agent, tool_use_id=call.tool_use_id)
    else:
        request = selectors.request_matching(
            agent=agent, session_id=call.session_id, tool_name=call.tool_name, input_hash=input_hash(call.tool_input)
        )
    if request is not None and request.state == RequestState.PENDING:
        services.request_cancel(request=request, reason=ANSWERED_LOCALLY)


def record_result(agent: Agent, call: HookCall) -> None:
    """PostToolUse / PostToolUseFailure: the call ran (or failed) on the agent's side.

    PermissionDenied: Claude Code's auto mode refused it; an audit row records that.
    """
    if call.event == PERMISSION_DENIED:
        services.request_record_denied_by_agent(
            agent=agent, call=call.submission(Context.INTERACTIVE), reason=call.denied_reason
        )
        return
    result: dict[str, Any] = (
        {"ok": True, "output": call.tool_response}
        if call.event == POST_TOOL_USE
        else {"ok": False, "error": call.error or "the tool failed"}
    )
    # Most calls were allowed: the update finds the request itself, in one round trip.
    if services.request_record_result_of_call(agent=agent, tool_use_id=call.tool_use_id, **result):
        return
    request = selectors.request_by_tool_use_id(agent=agent, tool_use_id=call.tool_use_id)
    if request is None:
        # Heard of only through Claude Code's prompt (the PermissionRequest gate): once it
        # ran, a later identical prompt is a new call, never answered by this one's allow.
        request = selectors.prompted_request_not_run(
            agent=agent, session_id=call.session_id, tool_name=call.tool_name, input_hash=input_hash(call.tool_input)
        )
    if request is None:
        return
    if request.state == RequestState.PENDING:
        # It ran without our answer: Claude Code's own dialog or rules let it through.
        services.request_cancel(request=request, reason=ANSWERED_LOCALLY)
    services.request_record_result(request=request, **result)


def wait_seconds(request: PermissionRequest, options: HookOptions) -> tuple[float, str | None]:
    """How long to wait, and the on-timeout to apply after it (None: answer pending)."""
    until_deadline = float(settings.GATEHOUSE_ASK_TIMEOUT)
    if request.deadline_at is not None:
        until_deadline = max(0.0, (request.deadline_at - timezone.now()).total_seconds())
    if options.wait is not None:
        return min(options.wait, until_deadline), options.on_timeout
    configured = float(settings.GATEHOUSE_HOOK_WAIT or until_deadline)
    wait = min(configured, until_deadline, float(settings.GATEHOUSE_MAX_WAIT))
    return wait, options.on_timeout or "deny"


# --- the view ---------------------------------------------------------------------------


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def _agent_for(request: HttpRequest) -> tuple[Agent | bool | None, list[tuple[Any, ...]] | None]:
    """Who the token names (False for a person), and the rows read with it (`_reads_ahead`)."""
    token = bearer_token(request.headers.get("Authorization", ""))
    if not token:
        return None, None
    principal, rows = authenticate_token_with(token, lambda digest: _reads_ahead(request, digest))
    if principal is None:
        return None, None
    if not isinstance(principal, AgentPrincipal):
        return False, None
    return principal.agent, rows[0] if rows else None


def _reads_ahead(request: HttpRequest, digest: str) -> list[Statement]:
    """A PreToolUse call's context, read with the agent's token: the submit it opens needs it first."""
    body = body_ahead(request)
    if not isinstance(body, dict) or body.get("hook_event_name") != PRE_TOOL_USE:
        return []
    return services.context_reads_ahead(body, digest)


def _event_of(request: HttpRequest) -> str:
    """The hook event named in the body, read leniently (only to shape a deny)."""
    try:
        body = json.loads(request.body or b"null")
    except (ValueError, RequestDataTooBig):
        return PRE_TOOL_USE
    event = body.get("hook_event_name") if isinstance(body, dict) else None
    return event if isinstance(event, str) else PRE_TOOL_USE


@csrf_exempt
def claude_code_hook(request: HttpRequest) -> JsonResponse:
    """Answer one Claude Code hook event with the JSON Claude Code expects on stdout."""
    if request.method != "POST":
        return _error(405, "method_not_allowed", "POST Claude Code's hook input JSON to this URL.")
    try:
        agent, read_ahead = _agent_for(request)
    except DatabaseError:
        # Fail closed even before we know who asks: a deny Claude Code honours, not a 500.
        log.exception("claude-code hook: database unavailable")
        return JsonResponse(render_failure(_event_of(request), DATABASE_UNAVAILABLE), status=503)
    if agent is None:
        return _error(401, "not_authenticated", "Send the agent's token as 'Authorization: Bearer <token>'.")
    if agent is False:
        return _error(403, "permission_denied", "Only an agent token may submit hook events, not a person's.")
    assert isinstance(agent, Agent)
    try:
        raw = request.body
    except RequestDataTooBig:
        return _error(413, "too_large", f"The body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.")
    response = _answer(agent, request, raw, read_ahead)
    # Binds the answer to the exact call it answers (its tool_use_id, tool name and input
    # are in the body): the hook refuses an answer for anything else.
    response[ANSWER_HEADER] = answer_binding(raw)
    return response


def answer_binding(raw: bytes) -> str:
    """The `Gatehouse-Answer-For` value for a hook input body: its SHA-256."""
    return "sha256=" + hashlib.sha256(raw).hexdigest()


def _answer(
    agent: Agent, request: HttpRequest, raw: bytes, read_ahead: list[tuple[Any, ...]] | None = None
) -> JsonResponse:
    try:
        options = parse_options(request.GET)
        call = parse_hook_input(strict_json.loads(raw or b"null"))
    except ValueError as exc:  # json.JSONDecodeError and HookInputError are both ValueErrors
        message = str(exc) if isinstance(exc, HookInputError) else f"The body is not valid JSON: {exc}"
        return _error(400, "invalid", message)
    if call is None:
        return JsonResponse({})
    if call.event in RECORDING_EVENTS:
        record_result(agent, call)
        return JsonResponse({})
    if options.withdraw:
        withdraw_call(agent, call)
        return JsonResponse({})
    return _decide(agent, call, options, read_ahead)


def _decide(
    agent: Agent, call: HookCall, options: HookOptions, read_ahead: list[tuple[Any, ...]] | None = None
) -> JsonResponse:
    try:
        outcome = open_call(agent, call, options, read_ahead)
        request = outcome.request
        if outcome.decision is not None or request is None or request.state != RequestState.PENDING:
            return JsonResponse(render(call.event, outcome))
        if options.ask_locally and call.event == PRE_TOOL_USE:
            return JsonResponse(_pre_tool_use("ask", "Gatehouse asks: approve here or from the Gatehouse queue."))
        wait, on_timeout = wait_seconds(request, options)
        if wait > 0:
            release_connections()
            async_to_sync(wait_for_decision)(request.pk, wait)
        outcome = settle(request, on_timeout, call.event)
        if outcome.decision is None and not outcome.hand_to_claude and not outcome.deferred:
            return JsonResponse(pending_body(request), status=202)
        return JsonResponse(render(call.event, outcome))
    except services.AuditUnavailable as exc:
        return JsonResponse(render_failure(call.event, str(exc)))
    except services.ToolUseIdReused as exc:
        return _error(409, "tool_use_id_reused", str(exc))
    except services.ServiceError as exc:
        return _error(400, "invalid", str(exc))
    except Exception:
        # Fail closed: an unexpected fault must never let the call through.
        log.exception("claude-code hook failed for %s %s", call.event, call.tool_name)
        return JsonResponse(render_failure(call.event, "Gatehouse failed to decide this call, so it is denied."))
