"""A team's approval settings: quorum, risk classes, deadlines, the escalation ladder, unknown tools."""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.db import transaction

from approvals.models import Membership, Team, TeamSettings, UnknownTools
from approvals.services.outcomes import ServiceError
from approvals.services.rules import MAX_APPROVALS

EDITABLE = (
    "approvals_required",
    "destructive_approvals",
    "protected_path_approvals",
    "approver_group",
    "exclude_owner",
    "ask_timeout",
    "deferred_timeout",
    "remind_after",
    "escalate_after",
    "on_call_group",
    "unknown_tools",
)


def team_settings_update(*, team: Team, **changes: Any) -> TeamSettings:
    """Change a team's approval settings (a team admin's; the caller checks who asks).

    - Every ladder step must fall inside the team's deadline: remind before escalate,
      both before `ask_timeout` (or `GATEHOUSE_ASK_TIMEOUT`). A rule's shorter deadline
      skips the steps that would fall after it.
    """
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise ServiceError(f"unknown team settings: {', '.join(sorted(unknown))}")
    current = TeamSettings.objects.filter(team=team).first() or TeamSettings(team=team)
    for name, value in changes.items():
        setattr(current, name, value)
    _check(current)
    current.save()
    return current


def _check(values: TeamSettings) -> None:
    for name in ("approvals_required",):
        if not 1 <= getattr(values, name) <= MAX_APPROVALS:
            raise ServiceError(f"{name} must be between 1 and {MAX_APPROVALS}")
    for name in ("destructive_approvals", "protected_path_approvals"):
        if not 0 <= getattr(values, name) <= MAX_APPROVALS:
            raise ServiceError(f"{name} must be between 0 (off) and {MAX_APPROVALS}")
    deadline = values.ask_timeout or django_settings.GATEHOUSE_ASK_TIMEOUT
    remind, escalate = values.remind_after, values.escalate_after
    if remind is not None and remind >= deadline:
        raise ServiceError(f"remind_after ({remind} s) must fall inside the deadline ({deadline} s)")
    if escalate is not None and escalate >= deadline:
        raise ServiceError(f"escalate_after ({escalate} s) must fall inside the deadline ({deadline} s)")
    if remind is not None and escalate is not None and escalate <= remind:
        raise ServiceError("escalate_after must come after remind_after")
    if escalate is not None and not values.on_call_group:
        raise ServiceError("escalate_after needs an on_call_group to escalate to")
    if values.unknown_tools not in UnknownTools.values:
        raise ServiceError(f"unknown_tools must be one of {', '.join(UnknownTools.values)}")


def team_group_set(*, team: Team, group: str, usernames: list[str]) -> list[str]:
    """Make exactly these members of the team the members of one of its groups ("leads")."""
    if not group or len(group) > 64 or not group.replace("_", "").replace("-", "").isalnum():
        raise ServiceError("a group name is letters, digits, - and _ (at most 64)")
    memberships = list(Membership.objects.select_related("user").filter(team=team))
    known = {m.user.get_username() for m in memberships}
    strangers = sorted(set(usernames) - known)
    if strangers:
        raise ServiceError(f"not members of team {team.name}: {', '.join(strangers)}")
    with transaction.atomic():
        for membership in memberships:
            inside = membership.user.get_username() in usernames
            groups = [g for g in membership.groups if g != group] + ([group] if inside else [])
            if groups != membership.groups:
                Membership.objects.filter(pk=membership.pk).update(groups=groups)
    return sorted(set(usernames))
