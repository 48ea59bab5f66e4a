"""Outbound PreToolUse and PermissionRequest webhooks, HMAC-signed.

Each webhook receives the JSON Claude Code would give a hook command on stdin and
answers with what such a command would print, so an existing hook script can sit
behind a tiny HTTP wrapper unchanged.

Signature: `X-Gatehouse-Timestamp: <unix seconds>` and
`X-Gatehouse-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>`.
The receiver recomputes it over the raw body and rejects stale timestamps (replays).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import httpx
from django.db import connection

from approvals.extensions import PreDecisionWork
from approvals.models import PermissionRequest, Team
from approvals.services import MAX_ANSWER_MESSAGE_CHARS, Answer
from approvals.written import ModelColumns, column, table
from relay.models import Webhook

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Gatehouse-Signature"
TIMESTAMP_HEADER = "X-Gatehouse-Timestamp"


class WebhookError(Exception):
    """The webhook did not give a usable answer (network, status, or body)."""


def webhook_create(
    *, team: Team, name: str, url: str, event: str, secret: str, timeout_ms: int = 5000, on_error: str = "ignore"
) -> Webhook:
    """Register an outbound webhook; `ValueError` with an actionable message for bad input."""
    if event not in Webhook.Event.values:
        raise ValueError(f"event must be one of {', '.join(Webhook.Event.values)}, not {event!r}")
    if on_error not in Webhook.OnError.values:
        raise ValueError(f"on_error must be ignore or deny, not {on_error!r}")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"url must start with http:// or https://, not {url!r}")
    if not 50 <= timeout_ms <= 60_000:
        raise ValueError("timeout_ms must be between 50 and 60000")
    if len(secret) < 16:
        raise ValueError("secret must be at least 16 characters (receivers verify the HMAC with it)")
    return Webhook.objects.create(
        team=team, name=name, url=url, event=event, secret=secret, timeout_ms=timeout_ms, on_error=on_error
    )


def signature(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify_signature(secret: str, timestamp: str, body: bytes, header: str, *, max_age: float = 300) -> bool:
    """What a receiver does; used by our tests and documented for webhook authors."""
    try:
        fresh = abs(time.time() - float(timestamp)) <= max_age
    except ValueError:
        return False
    return fresh and hmac.compare_digest(signature(secret, timestamp, body), header)


def post(webhook: Webhook, payload: dict[str, Any]) -> dict[str, Any]:
    """POST the hook JSON; return the parsed answer ({} for an empty body)."""
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Gatehouse-Webhook/1",
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: signature(webhook.secret, timestamp, body),
    }
    response = _exchange_within(webhook, body, headers)
    if response.status_code >= 300:
        raise WebhookError(f"HTTP {response.status_code}")
    if not response.content.strip():
        return {}
    try:
        answer = response.json()
    except ValueError:
        raise WebhookError("the answer is not JSON") from None
    if not isinstance(answer, dict):
        raise WebhookError("the answer is not a JSON object")
    return answer


def _exchange_within(webhook: Webhook, body: bytes, headers: dict[str, str]) -> httpx.Response:
    """The whole answer within `timeout_ms`, or WebhookError.

    httpx's timeout bounds each read, not the exchange: a webhook dripping a byte at a
    time held a call for 30 s and then answered. The exchange runs beside the caller,
    who stops waiting at the deadline; closing the client then ends the exchange at its
    next read.
    """
    seconds = webhook.timeout_ms / 1000
    client = httpx.Client(timeout=seconds)
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webhook")
    future = worker.submit(client.post, webhook.url, content=body, headers=headers)
    try:
        return future.result(timeout=seconds)
    except FutureTimeout:
        raise WebhookError(f"no complete answer within {webhook.timeout_ms} ms") from None
    except httpx.HTTPError as exc:
        raise WebhookError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        client.close()
        worker.shutdown(wait=False)


def _hook_input(event: str, call: dict[str, Any]) -> dict[str, Any]:
    payload = {
        "session_id": call.get("session_id", ""),
        "transcript_path": call.get("transcript_path", ""),
        "cwd": call.get("cwd", ""),
        "permission_mode": call.get("mode") or call.get("permission_mode") or "default",
        "hook_event_name": event,
        "tool_name": call.get("tool_name", ""),
        "tool_input": call.get("tool_input", {}),
    }
    if event == Webhook.Event.PRE_TOOL_USE:
        payload["tool_use_id"] = call.get("tool_use_id", "")
    else:
        payload["permission_suggestions"] = call.get("permission_suggestions", [])
    return payload


_WEBHOOK = ModelColumns(Webhook, "w")


@functools.cache
def _enabled_sql(vendor: str) -> str:
    """The team's enabled webhooks of one or two events (the same event twice for one), by
    id: every name from the model's metadata, quoted; the values are parameters."""
    team, enabled, event, pk = (f"w.{column(Webhook, name)}" for name in ("team", "enabled", "event", "id"))
    return (
        f"SELECT {_WEBHOOK.columns} FROM {table(Webhook)} w"  # noqa: S608
        f" WHERE {team} = %s AND {enabled} = %s AND {event} IN (%s, %s) ORDER BY {pk}"
    )


def _enabled(team_id: int, *events: str) -> list[Webhook]:
    """The team's enabled webhooks of these events (one or two), by id.

    Written out rather than built by the ORM (`approvals.written`): every call of every
    agent reads this, nearly always to find nothing; compiling the queryset cost ~0.3 ms
    of CPU per call, and `raw` resolved its columns again on every call.
    """
    first, second = events[0], events[-1]
    with connection.cursor() as cursor:
        cursor.execute(_enabled_sql(connection.vendor), [team_id, True, str(first), str(second)])
        return [hook for hook, _ in _WEBHOOK.rows(cursor.fetchall()) if hook is not None]


def _call_all(hooks: list[Webhook], payload: dict[str, Any]) -> list[tuple[Webhook, dict[str, Any] | WebhookError]]:
    """Call every hook at once; each keeps its own timeout."""

    def one(hook: Webhook) -> dict[str, Any] | WebhookError:
        try:
            return post(hook, payload)
        except WebhookError as exc:
            log.warning("webhook %s (%s) failed: %s", hook.name, hook.url, exc)
            return exc

    if not hooks:
        return []
    if len(hooks) <= 1:
        return [(hook, one(hook)) for hook in hooks]
    with ThreadPoolExecutor(max_workers=min(len(hooks), 8)) as pool:
        return list(zip(hooks, pool.map(one, hooks), strict=True))


def _failure_text(hook: Webhook, error: WebhookError) -> str:
    return f"webhook {hook.name} failed ({error}) and is set to deny on error"


# --- PreToolUse: a pre-decision provider ------------------------------------------------------


def pre_tool_use_outputs(
    call: dict[str, Any], team_id: int, hooks: list[Webhook] | None = None
) -> list[dict[str, Any]]:
    """Hook outputs in Claude Code's shape, named after their webhook, for the engine."""
    if hooks is None:
        hooks = _enabled(team_id, Webhook.Event.PRE_TOOL_USE)
    outputs: list[dict[str, Any]] = []
    for hook, answer in _call_all(hooks, _hook_input("PreToolUse", call)):
        name = f"webhook {hook.name}"
        if isinstance(answer, WebhookError):
            if hook.on_error == Webhook.OnError.DENY:
                outputs.append(
                    {
                        "hook": name,
                        "hookSpecificOutput": {
                            "hookEventName": "PreToolUse",
                            "permissionDecision": "deny",
                            "permissionDecisionReason": _failure_text(hook, answer),
                        },
                    }
                )
            continue
        inner = answer.get("hookSpecificOutput", answer)
        if isinstance(inner, dict) and inner:
            outputs.append({"hook": name, "hookSpecificOutput": inner})
    return outputs


def permission_request_outputs(
    call: dict[str, Any], team_id: int, hooks: list[Webhook] | None = None
) -> list[dict[str, Any]]:
    """PermissionRequest answers for headless calls, which the engine resolves itself."""
    if hooks is None:
        hooks = _enabled(team_id, Webhook.Event.PERMISSION_REQUEST)
    outputs: list[dict[str, Any]] = []
    payload = _hook_input("PermissionRequest", call)
    for hook, answer in _call_all(hooks, payload):
        name = f"webhook {hook.name}"
        if isinstance(answer, WebhookError):
            if hook.on_error == Webhook.OnError.DENY:
                outputs.append({"hook": name, "decision": {"behavior": "deny", "message": _failure_text(hook, answer)}})
            continue
        inner = answer.get("hookSpecificOutput", answer)
        if isinstance(inner, dict) and inner:
            outputs.append({"hook": name, **inner})
    return outputs


def _unknown_hooks() -> dict[str, Any]:
    # We could not even learn which hooks apply (database trouble): a hook that is set
    # to deny on error may be among them, so never let rules auto-allow — ask.
    return {
        "pre_tool_use_hooks": [
            {
                "hook": "webhooks",
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "ask",
                    "permissionDecisionReason": (
                        "Gatehouse could not run its PreToolUse webhooks; a person must decide."
                    ),
                },
            }
        ]
    }


# team id -> the rules version its webhooks were read at, and its enabled webhooks of
# both events then. Every call reads the version first (with what else a submit reads);
# a change to a webhook sets a new one in its own commit (relay migration 0004), so a
# webhook added, changed or disabled reaches the very next call in every process.
_team_hooks: dict[int, tuple[str, list[Webhook]]] = {}
_TEAMS_KEPT = 1024


def _enabled_at(team_id: int, rules_version: str) -> list[Webhook]:
    """The team's enabled PreToolUse and PermissionRequest webhooks, by id, read once per rules version."""
    kept = _team_hooks.get(team_id)
    if kept is not None and kept[0] == rules_version:
        return kept[1]
    hooks = _enabled(team_id, Webhook.Event.PRE_TOOL_USE, Webhook.Event.PERMISSION_REQUEST)
    if len(_team_hooks) >= _TEAMS_KEPT:
        _team_hooks.clear()  # many teams: start over, never grow
    _team_hooks[team_id] = (rules_version, hooks)
    return hooks


def pre_decision(call: dict[str, Any], *, team_id: int, rules_version: str) -> PreDecisionWork | None:
    """The `PreDecisionProvider`: which hooks apply is known here, on the request's thread
    (read once per rules version); the returned work only calls them (in parallel with the
    classifier)."""
    headless = call.get("context") == "headless"
    try:
        hooks = _enabled_at(team_id, rules_version)
    except Exception:
        log.exception("PreToolUse webhooks could not be run")
        return _unknown_hooks
    pre_tool_use = [hook for hook in hooks if hook.event == Webhook.Event.PRE_TOOL_USE]
    permission_request = [hook for hook in hooks if hook.event == Webhook.Event.PERMISSION_REQUEST] if headless else []
    if not pre_tool_use and not permission_request:
        return None

    def work() -> dict[str, Any]:
        try:
            contribution: dict[str, Any] = {"pre_tool_use_hooks": pre_tool_use_outputs(call, team_id, pre_tool_use)}
            if headless:
                contribution["permission_request_hooks"] = permission_request_outputs(call, team_id, permission_request)
            return contribution
        except Exception:
            log.exception("PreToolUse webhooks could not be run")
            return _unknown_hooks()

    return work


# --- PermissionRequest: a racer ---------------------------------------------------------------


def _decision_of(answer: dict[str, Any]) -> dict[str, Any] | None:
    inner = answer.get("hookSpecificOutput", answer)
    if not isinstance(inner, dict):
        return None
    decision = inner.get("decision", inner)
    if isinstance(decision, dict) and decision.get("behavior") in ("allow", "deny"):
        return decision
    return None


def _offer(
    hook: Webhook, behavior: str, message: str, updated_input: dict[str, Any] | None, extra: dict[str, Any]
) -> Answer:
    """A hook's answer; its message cut to the answer limit, so a long-winded deny still counts."""
    return Answer(
        behavior=behavior,
        surface="webhook",
        decided_by=f"webhook {hook.name}",
        message=message[:MAX_ANSWER_MESSAGE_CHARS],
        updated_input=updated_input,
        reason_type="hook",
        reason_extra=extra,
    )


class PermissionRequestWebhooks:
    """Async PermissionRequest webhooks racing the people for an ask."""

    name = "webhooks"

    def may_answer(self, request: PermissionRequest) -> bool:
        """False when the team had no enabled PermissionRequest webhook at the rules version
        the ask's submit read, as `pre_decision` kept them in this process; True when that
        is not known here (another version kept, none, a request read back): the job reads."""
        kept = _team_hooks.get(request.team_id)
        if kept is None or request.rules_version is None or kept[0] != request.rules_version:
            return True
        return any(hook.event == Webhook.Event.PERMISSION_REQUEST for hook in kept[1])

    def offers(self, request: PermissionRequest, still_pending: Callable[[], bool]) -> list[Answer]:
        call = {
            "session_id": request.session_id,
            "transcript_path": request.transcript_path,
            "cwd": request.cwd,
            "permission_mode": request.permission_mode,
            "tool_name": request.tool_name,
            "tool_input": request.tool_input,
            "permission_suggestions": request.permission_suggestions,
        }
        hooks = _enabled(request.team_id, Webhook.Event.PERMISSION_REQUEST)
        if not hooks or not still_pending():
            return []
        offers: list[Answer] = []
        for hook, answer in _call_all(hooks, _hook_input("PermissionRequest", call)):
            extra = {"hook": f"webhook {hook.name}", "event": "PermissionRequest"}
            if isinstance(answer, WebhookError):
                if hook.on_error == Webhook.OnError.DENY:
                    offers.append(_offer(hook, "deny", _failure_text(hook, answer), None, extra))
                continue
            decision = _decision_of(answer)
            if decision is None:
                continue
            updated = decision.get("updatedInput")
            message = decision.get("message")
            offers.append(
                _offer(
                    hook,
                    decision["behavior"],
                    message if isinstance(message, str) else "",
                    updated if isinstance(updated, dict) else None,
                    extra,
                )
            )
        # A deny from any hook beats an allow from another, as in Claude Code.
        return sorted(offers, key=lambda offer: offer.behavior != "deny")
