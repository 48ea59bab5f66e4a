"""The request card: one partial template, rendered for the page and for every push."""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string

from approvals import selectors
from approvals.models import PermissionRequest


def render_card(request: PermissionRequest, user: Any) -> str:
    """HTML of one request card as `user` sees it (buttons only for approvers)."""
    decision = selectors.decision_for(request) if request.state != "pending" else None
    return render_to_string(
        "approvals/_request_card.html",
        {"req": request, "decision": decision, "can_decide": selectors.can_decide(user, request)},
    )
