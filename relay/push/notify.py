"""What a phone notification says about an ask, and whether it may offer Allow.

A person approves what they saw. A notification shows a few lines at most, so it offers
**Allow** only when the whole input is in it: nothing cut, nothing masked, no character
that renders as nothing, and the call is not destructive. Otherwise it offers **Deny**
and **Open** (the request's page, where the input is shown whole).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings

from approvals.invisible import count_hidden
from approvals.models import AuditKind, Decision, PermissionRequest
from relay.bridges.base import allow_withheld, destructive_warning, excerpt_for, outcome_text, request_url
from relay.masking import mask

# What fits: a notification's expanded body on Android and iOS shows about this much.
BODY_CHARS = 240
BODY_LINES = 6
SUMMARY_CHARS = 120


@dataclass(frozen=True)
class Notice:
    """One ask as a notification: title, one-line summary, body, and whether Allow is offered."""

    request_id: str
    tool_name: str
    title: str
    summary: str
    body: str
    url: str
    destructive: bool
    offers_allow: bool
    why_no_allow: str


def notice_for(request: PermissionRequest) -> Notice:
    excerpt = excerpt_for(request.tool_name, request.tool_input, limit=BODY_CHARS)
    lines = excerpt.body.splitlines() or [""]
    warning = destructive_warning(request)
    why = allow_withheld(
        destructive=bool(warning),
        cut=excerpt.truncated or len(lines) > BODY_LINES,
        masked=excerpt.masked,
        hidden=count_hidden(excerpt.body),
    )
    body = "\n".join(lines[:BODY_LINES]) + ("\n…" if len(lines) > BODY_LINES and not excerpt.truncated else "")
    if warning:
        body = f"⚠ {mask(warning)}\n{body}"
    first = next((line.strip() for line in lines if line.strip()), "")
    summary = f"{request.tool_name}: {first}" if first else request.tool_name
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1].rstrip() + "…"
    return Notice(
        request_id=str(request.pk),
        tool_name=request.tool_name,
        title=f"{request.agent.name} asks: {request.tool_name}",
        summary=summary,
        body=body,
        url=request_url(request.pk),
        destructive=bool(warning),
        offers_allow=not why,
        why_no_allow=why,
    )


# The escalation ladder's steps push an ask again (docs/POLICY.md, "The escalation ladder").
LADDER_STEPS = (AuditKind.REMINDER, AuditKind.ESCALATION)


def again(notice: Notice) -> Notice:
    """The same ask pushed again by a ladder step: the phone rings once more, and says why."""
    return replace(notice, title=f"Still waiting: {notice.title}")


def ask_payload(notice: Notice, tokens: dict[str, str], expires_at: str) -> dict[str, Any]:
    """The Web Push payload of an ask (docs/API.md): what the service worker shows."""
    return {
        "type": "ask",
        "request_id": notice.request_id,
        "tool_name": notice.tool_name,
        "title": notice.title,
        "summary": notice.summary,
        "body": notice.body,
        "url": notice.url,
        "destructive": notice.destructive,
        "expires_at": expires_at,
        "actions": [{"action": action, "token": token} for action, token in tokens.items()],
        "action_url": f"{settings.PUBLIC_URL}/api/v1/push-actions/",
    }


def finished_payload(request: PermissionRequest, decision: Decision) -> dict[str, Any]:
    """The Web Push payload that replaces an ask's notification once it is over."""
    return {
        "type": "finished",
        "request_id": str(request.pk),
        "tool_name": request.tool_name,
        "summary": mask(outcome_text(request, decision)),
        "url": request_url(request.pk),
        "actions": [],
    }
