"""Quorum and the escalation ladder, read side: what an ask needs, who may vote, how far it got.

A call may need approvals from several distinct people (docs/POLICY.md, "Quorum"): an ask
rule's `approvals_required` (where several match, the largest wins), the team's setting,
or a risk class of the team's (destructive commands, protected paths). What applies is
fixed when the call is submitted and kept in `evaluation["quorum"]`, which the audit
chain covers. The writes are in `approvals.services.votes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from approvals.models import AuditKind, Decision, Membership, PermissionRequest, TeamSettings


@dataclass(frozen=True)
class Requirement:
    """What one ask needs before it is allowed: `required` approvals from distinct people."""

    required: int
    # Only members of this team group count ("" : any approver of the team).
    group: str = ""
    exclude_owner: bool = False
    # What asked for it: "rule Bash(rm:*)", "team", "destructive", "protected path".
    covered_by: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "required": self.required,
            "group": self.group,
            "exclude_owner": self.exclude_owner,
            "covered_by": list(self.covered_by),
        }

    @classmethod
    def of(cls, request: PermissionRequest) -> Requirement | None:
        """The requirement stored on a request; None when people-only quorum does not apply."""
        stored = (request.evaluation or {}).get("quorum")
        if not isinstance(stored, dict):
            return None
        return cls(
            required=int(stored.get("required") or 1),
            group=str(stored.get("group") or ""),
            exclude_owner=bool(stored.get("exclude_owner")),
            covered_by=tuple(str(item) for item in stored.get("covered_by") or []),
        )


@dataclass(frozen=True)
class RuleQuorum:
    """An ask rule that asks for more than one approval (read from the team's rules)."""

    rule: str
    source: str
    required: int
    group: str


def requirement_for(
    settings: TeamSettings, *, asked: bool, matched: list[RuleQuorum], destructive: bool, protected_path: bool
) -> Requirement | None:
    """What a call needs, or None when one approval (or none) will do, as without quorum.

    - `asked`: the engine asks; the team-wide setting applies to asks only, a risk class
      also to what would have been allowed.
    - `matched`: the quorum ask rules that match the call; the largest wins, then the
      first one with a group names the group.
    - A risk class covers a call even at one approval: only a person may allow it.
    """
    candidates: list[tuple[int, str, str]] = [(q.required, q.group, f"rule {q.rule}") for q in matched]
    if asked and settings.approvals_required > 1:
        candidates.append((settings.approvals_required, settings.approver_group, "team"))
    if destructive and settings.destructive_approvals:
        candidates.append((settings.destructive_approvals, settings.approver_group, "destructive"))
    if protected_path and settings.protected_path_approvals:
        candidates.append((settings.protected_path_approvals, settings.approver_group, "protected path"))
    if not candidates:
        return None
    required = max(count for count, _, _ in candidates)
    group = next((g for count, g, _ in sorted(candidates, key=lambda c: -c[0]) if g), "")
    return Requirement(
        required=required,
        group=group,
        exclude_owner=settings.exclude_owner,
        covered_by=tuple(what for _, _, what in candidates),
    )


def groups_of(user: Any, team_id: int) -> list[str]:
    """The team groups a person is in (none outside the team)."""
    found = Membership.objects.filter(user=user, team_id=team_id).values_list("groups", flat=True).first()
    return [str(group) for group in found or []]


def eligible_groups(request: PermissionRequest, requirement: Requirement, on_call_group: str) -> list[str]:
    """The groups whose members may vote: the named group, and on-call once escalated."""
    if not requirement.group:
        return []
    groups = [requirement.group]
    if on_call_group and _escalated(request):
        groups.append(on_call_group)
    return groups


def _escalated(request: PermissionRequest) -> bool:
    return Decision.objects.filter(request_id=request.pk, kind=AuditKind.ESCALATION).exists()


@dataclass(frozen=True)
class Progress:
    """How far an ask got: the approvals so far and the ladder's steps, for every card."""

    required: int
    approvers: list[str]
    group: str
    steps: list[str]

    def sentence(self) -> str:
        """'1 of 2 — alice approved', the same words on every surface."""
        count = len(self.approvers)
        if not count:
            who = "no approvals yet"
        else:
            names = " and ".join([", ".join(self.approvers[:-1]), self.approvers[-1]] if count > 1 else self.approvers)
            who = f"{names} approved"
        from_group = f" (from {self.group})" if self.group else ""
        return f"{count} of {self.required}{from_group} — {who}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "required": self.required,
            "approvers": self.approvers,
            "group": self.group,
            "steps": self.steps,
            "sentence": self.sentence() if self.required > 1 else "",
        }


STEP_WORDS = {AuditKind.REMINDER: "reminded", AuditKind.ESCALATION: "escalated to"}


def progress_of(request: PermissionRequest) -> Progress | None:
    """The request's votes and ladder steps, or None when it has neither quorum nor a ladder."""
    requirement = Requirement.of(request)
    if requirement is None and not (request.evaluation or {}).get("ladder"):
        return None
    rows = Decision.objects.filter(
        request_id=request.pk, kind__in=[AuditKind.VOTE, AuditKind.REMINDER, AuditKind.ESCALATION]
    ).order_by("id")
    approvers: list[str] = []
    steps: list[str] = []
    for kind, decided_by, created_at, reason in rows.values_list("kind", "decided_by", "created_at", "reason"):
        if kind == AuditKind.VOTE:
            approvers.append(decided_by)
        else:
            target = f" {reason.get('group')}" if kind == AuditKind.ESCALATION and reason.get("group") else ""
            steps.append(f"{STEP_WORDS[AuditKind(kind)]}{target} at {created_at:%H:%M:%S}")
    required = requirement.required if requirement is not None else 1
    return Progress(required, approvers, requirement.group if requirement else "", steps)
