"""The shapes requests and decisions are sent in to agents and the API."""

from __future__ import annotations

from typing import Any

from approvals import quorum
from approvals.models import (
    Decision,
    PermissionRequest,
    RequestState,
)


def decision_payload(decision: Decision) -> dict[str, Any]:
    """What an agent hears: the decision with its reason."""
    return {
        "id": decision.pk,
        "behavior": decision.behavior,
        "message": decision.message,
        "updated_input": decision.updated_input,
        "reason": decision.reason,
        "decided_by": decision.decided_by,
        "surface": decision.surface,
        "decided_at": decision.created_at.isoformat(),
    }


def request_payload(request: PermissionRequest, decision: Decision | None = None) -> dict[str, Any]:
    if decision is not None and request.state == RequestState.PENDING:
        # The row was read before the decision committed (its state changes in the same
        # transaction as the audit row): re-read it so status and decision agree.
        request.refresh_from_db(fields=["state", "decided_at", "version"])
    evaluation = request.evaluation or {}
    return {
        "id": str(request.pk),
        "status": request.state,
        "agent": request.agent.name,
        "tool_use_id": request.tool_use_id,
        "tool_name": request.tool_name,
        "tool_input": request.tool_input,
        "session_id": request.session_id,
        "cwd": request.cwd,
        "permission_mode": request.permission_mode,
        "context": request.context,
        "created_at": request.created_at.isoformat(),
        "deadline_at": request.deadline_at.isoformat() if request.deadline_at else None,
        "warnings": evaluation.get("warnings", []),
        "destructive_warning": evaluation.get("destructive_warning"),
        "suggested_rules": evaluation.get("suggested_rules", []),
        "permission_suggestions": request.permission_suggestions,
        "call_context": request.call_context,
        "decision": decision_payload(decision) if decision is not None else None,
        "quorum": _progress_payload(request),
    }


def _progress_payload(request: PermissionRequest) -> dict[str, Any] | None:
    progress = quorum.progress_of(request)
    return progress.to_dict() if progress is not None else None
