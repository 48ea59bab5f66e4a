"""The stop switch: a team admin pauses one agent or a whole team, and resumes it.

While paused, every call of the agent (or of any agent of the team) is answered the
pause's answer at once: `deny`, or `ask` (a person must answer; no rule, mode, webhook or
classifier allows it). Pausing and resuming are each a row in the audit chain: on a
control request of the agent (tool `Gatehouse:pause` / `Gatehouse:resume`), one per
agent the switch covers, so the audit log, its export and `audit_verify` show who
stopped what, when, and why.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from approvals.audit import append_decision, input_hash
from approvals.models import Agent, Pause, PauseAnswer, PermissionRequest, RequestState, Team
from approvals.services.outcomes import ServiceError

PAUSE_TOOL = "Gatehouse:pause"
RESUME_TOOL = "Gatehouse:resume"


def pause_set(*, team: Team, agent: Agent | None, answer: str, user: User, surface: str, note: str = "") -> Pause:
    """Pause one agent (or, with agent None, the whole team); pausing it again changes the answer."""
    if answer not in PauseAnswer.values:
        raise ServiceError(f"unknown answer {answer!r}; use deny or ask")
    if agent is not None and agent.team_id != team.pk:
        raise ServiceError(f"agent {agent.name!r} is not in team {team.name!r}")
    with transaction.atomic():
        pause, _ = Pause.objects.update_or_create(
            team=team, agent=agent, defaults={"answer": answer, "note": note[:500], "created_by": user}
        )
        _audit(team, agent, PAUSE_TOOL, {"answer": answer, "note": note[:500]}, user, surface)
    return pause


def pause_lift(*, pause: Pause, user: User, surface: str) -> None:
    """Resume what the pause stopped: calls are decided by the rules again from the next one."""
    with transaction.atomic():
        if Pause.objects.filter(pk=pause.pk).delete()[0] == 0:
            raise ServiceError("that pause was already lifted")
        _audit(pause.team, pause.agent, RESUME_TOOL, {"answer": pause.answer}, user, surface)


def _audit(team: Team, agent: Agent | None, tool: str, details: dict[str, str], user: User, surface: str) -> None:
    """One audit row per agent the switch covers, each on its own control request."""
    agents = [agent] if agent is not None else list(Agent.objects.filter(team=team, revoked_at__isnull=True))
    scope = "agent" if agent is not None else "team"
    verb = "paused" if tool == PAUSE_TOOL else "resumed"
    now = timezone.now()
    for each in agents:
        tool_input = {"scope": scope, "team": team.name, "agent": each.name, **details}
        request = PermissionRequest.objects.create(
            agent=each,
            team=team,
            tool_use_id=f"gatehouse-{verb}-{uuid.uuid4().hex}",
            tool_name=tool,
            tool_input=tool_input,
            input_hash=input_hash(tool_input),
            permission_mode=each.default_mode,
            state=RequestState.DECIDED,
            decided_at=now,
        )
        subject = f"agent {each.name}" if scope == "agent" else f"team {team.name}"
        append_decision(
            request,
            behavior="pause" if tool == PAUSE_TOOL else "resume",
            message=f"{user.get_username()} {verb} {subject}" + (f": {details['note']}" if details.get("note") else ""),
            reason={"type": "other", "detail": verb, "scope": scope, "answer": details["answer"]},
            decided_by=user.get_username(),
            surface=surface,
            user=user,
            latency_ms=0.0,
        )
