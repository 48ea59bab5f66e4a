"""Forms of the dashboard pages: they parse and validate; services do the writing."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django import forms
from django.contrib.auth.models import User
from django.utils import timezone

from approvals import strict_json
from approvals.models import Agent, Mode, Role, RuleBehavior, RuleScope, RuleSource, Team, UnknownTools
from approvals.services import MAX_ANSWER_MESSAGE_CHARS, MAX_REMEMBER_HOURS, MIN_REMEMBER_HOURS, Answer
from policy.decision import REASON_TYPES

# The order people read sources in: settings-class sources weakest to strongest, then
# the runtime ones (Claude Code's own precedence for settings files).
SOURCE_ORDER = [
    RuleSource.USER_SETTINGS,
    RuleSource.PROJECT_SETTINGS,
    RuleSource.LOCAL_SETTINGS,
    RuleSource.FLAG_SETTINGS,
    RuleSource.POLICY_SETTINGS,
    RuleSource.CLI_ARG,
    RuleSource.COMMAND,
    RuleSource.SESSION,
    RuleSource.AUTOPILOT,
]
# policySettings is the organisation's managed policy: nobody edits it from a browser.
# Autopilot rules are made only by the autopilot (a person revokes them, never writes them).
EDITABLE_SOURCES = [s for s in SOURCE_ORDER if s not in (RuleSource.POLICY_SETTINGS, RuleSource.AUTOPILOT)]


class DecideForm(forms.Form):
    """One button press on a request card."""

    ACTIONS = {
        "once": ("allow", "once"),
        "session": ("allow", "session"),
        "always": ("allow", "always"),
        "deny": ("deny", "once"),
        # "Deny and stop": the deny also ends the agent's turn (Claude Code's `interrupt`).
        "stop": ("deny", "once"),
        # An AskUserQuestion card's answers (fields answer-<n>), sent as an allow.
        "answer": ("allow", "once"),
    }

    action = forms.ChoiceField(choices=[(a, a) for a in ACTIONS])
    # "Always allow" may narrow to this project instead of everyone.
    scope = forms.ChoiceField(choices=[("always", "everyone"), ("project", "this project")], required=False)
    hours = forms.FloatField(required=False, min_value=MIN_REMEMBER_HOURS, max_value=MAX_REMEMBER_HOURS)
    message = forms.CharField(required=False, max_length=MAX_ANSWER_MESSAGE_CHARS)

    def answer(self, *, surface: str, user: User | None, answers: dict[str, Any] | None = None) -> Answer:
        """This press as the `Answer` `services.request_decide` takes (raises ServiceError as it does)."""
        behavior, remember = self.ACTIONS[self.cleaned_data["action"]]
        if remember == "always":
            remember = self.cleaned_data.get("scope") or "always"
        hours = self.cleaned_data.get("hours") if remember in ("always", "project", "session") else None
        return Answer(
            behavior=behavior,
            surface=surface,
            user=user,
            message=self.cleaned_data.get("message", "").strip(),
            remember=remember,
            remember_hours=hours,
            # "Deny and stop": the deny also ends the agent's turn.
            reason_extra={"interrupt": True} if self.cleaned_data["action"] == "stop" else None,
            answers=answers,
        )


class BatchDecideForm(forms.Form):
    """One press of "Allow all N" / "Deny all N" on the bar over identical pending calls."""

    ids = forms.Field(widget=forms.MultipleHiddenInput)
    action = forms.ChoiceField(choices=[("once", "allow once"), ("deny", "deny")])
    message = forms.CharField(required=False, max_length=MAX_ANSWER_MESSAGE_CHARS)

    def clean_ids(self) -> list[uuid.UUID]:
        try:
            return [uuid.UUID(str(value)) for value in self.cleaned_data["ids"]]
        except ValueError as exc:
            raise forms.ValidationError("every id must be a request id (a UUID)") from exc

    def decision(self) -> dict[str, Any]:
        """The keyword arguments `services.request_decide_batch` takes for this press."""
        behavior = "allow" if self.cleaned_data["action"] == "once" else "deny"
        return {"behavior": behavior, "message": self.cleaned_data.get("message", "").strip()}


LOCAL_INPUT = {"type": "datetime-local", "step": "1"}


def _local_moments(data: Any, names: tuple[str, ...], fields: dict[str, forms.Field]) -> Any:
    """`data` with each moment written as a `datetime-local` input shows it: the viewer's zone.

    - A link may carry `2026-12-01T09:30:00+00:00`; the input cannot show an offset, so it
      would stay empty and the filter silently drop on the next submit.
    """
    data = data.copy()
    for name in names:
        try:
            moment = fields[name].clean(data.get(name))
        except forms.ValidationError:
            continue  # left as typed: the form says what is wrong with it
        if moment is not None:
            data[name] = timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M:%S")
    return data


class AuditFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    agent = forms.CharField(required=False, max_length=100)
    session = forms.CharField(required=False, max_length=200)
    tool = forms.CharField(required=False, max_length=200)
    behavior = forms.ChoiceField(required=False, choices=[("", "any"), ("allow", "allow"), ("deny", "deny")])
    reason_type = forms.ChoiceField(required=False, choices=[("", "any")] + [(t, t) for t in sorted(REASON_TYPES)])
    rule = forms.CharField(required=False, max_length=4096)
    decided_by = forms.CharField(required=False, max_length=150)
    surface = forms.CharField(required=False, max_length=32)
    since = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs=LOCAL_INPUT))
    until = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs=LOCAL_INPUT))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.is_bound:
            self.data = _local_moments(self.data, ("since", "until"), self.fields)

    def filters(self) -> dict[str, Any]:
        return {key: value for key, value in self.cleaned_data.items() if value not in (None, "")}

    def query(self) -> dict[str, str]:
        """The filters as query-string values (the API's export takes ISO datetimes)."""
        return {
            key: value.isoformat() if hasattr(value, "isoformat") else str(value)
            for key, value in self.filters().items()
        }


class RuleForm(forms.Form):
    rule = forms.CharField(max_length=4096, help_text="Claude Code syntax, e.g. Bash(npm run test:*)")
    behavior = forms.ChoiceField(choices=RuleBehavior.choices)
    source = forms.ChoiceField(choices=[(s.value, s.label) for s in EDITABLE_SOURCES], initial="localSettings")
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    scope = forms.ChoiceField(choices=RuleScope.choices)
    agent = forms.ModelChoiceField(queryset=Agent.objects.none(), required=False)
    project_path = forms.CharField(required=False, max_length=4096)
    session_id = forms.CharField(required=False, max_length=200)
    expires_at = forms.DateTimeField(
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="in your time zone; empty = never",
    )
    ask_timeout = forms.IntegerField(required=False, min_value=1, max_value=86_400, help_text="seconds")
    approvals_required = forms.IntegerField(
        required=False, min_value=1, max_value=10, initial=1, help_text="ask rules: approvals from distinct people"
    )
    approver_group = forms.RegexField(
        r"^[A-Za-z0-9_-]*$", required=False, max_length=64, help_text="ask rules: only this team group counts"
    )
    note = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args: Any, teams: Any, agents: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams  # type: ignore[attr-defined]
        self.fields["agent"].queryset = agents  # type: ignore[attr-defined]
        if teams.count() == 1:
            self.fields["team"].widget = forms.HiddenInput()
            self.fields["team"].initial = teams.first()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        agent, team = data.get("agent"), data.get("team")
        if agent is not None and team is not None and agent.team_id != team.pk:
            self.add_error("agent", "That agent belongs to another team.")
        return data


class ExplainForm(forms.Form):
    """A tool call to dry-run through the engine."""

    tool_name = forms.CharField(max_length=200, initial="Bash")
    tool_input = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        initial='{"command": "git push --force origin main"}',
        help_text="JSON object",
    )
    cwd = forms.CharField(required=False, max_length=4096, initial="/home/dev/project")
    mode = forms.ChoiceField(choices=Mode.choices, initial=Mode.DEFAULT)
    agent = forms.ModelChoiceField(
        queryset=Agent.objects.none(), required=False, empty_label="any agent (rules for everyone)"
    )
    session_id = forms.CharField(required=False, max_length=200)

    def __init__(self, *args: Any, agents: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = agents  # type: ignore[attr-defined]

    def clean_tool_input(self) -> dict[str, Any]:
        try:
            value = strict_json.loads(self.cleaned_data["tool_input"])
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}.") from None
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('The tool input must be a JSON object, e.g. {"command": "ls"}.')
        return value


class AgentForm(forms.Form):
    name = forms.CharField(max_length=100)
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    mode = forms.ChoiceField(choices=Mode.choices, initial=Mode.DEFAULT, label="Default mode")

    def __init__(self, *args: Any, teams: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams  # type: ignore[attr-defined]
        if teams.count() == 1:
            self.fields["team"].widget = forms.HiddenInput()
            self.fields["team"].initial = teams.first()


class PersonInviteForm(forms.Form):
    username = forms.CharField(max_length=150, label="User name")
    email = forms.EmailField(required=False, label="Email (optional)")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.APPROVER)
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)

    def __init__(self, *args: Any, teams: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams  # type: ignore[attr-defined]
        if teams.count() == 1:
            self.fields["team"].widget = forms.HiddenInput()
            self.fields["team"].initial = teams.first()


class TeamSettingsForm(forms.Form):
    """A team's approval settings (see `TeamSettings`); durations in seconds, empty = the default."""

    approvals_required = forms.IntegerField(min_value=1, max_value=10, help_text="approvals every ask needs")
    destructive_approvals = forms.IntegerField(
        min_value=0, max_value=10, help_text="approvals a destructive command needs (0: off)"
    )
    protected_path_approvals = forms.IntegerField(
        min_value=0, max_value=10, help_text="approvals a protected path needs (0: off)"
    )
    approver_group = forms.RegexField(
        r"^[A-Za-z0-9_-]*$", required=False, max_length=64, help_text="only this group counts (empty: any approver)"
    )
    exclude_owner = forms.BooleanField(required=False, help_text="an agent's owner never counts toward its quorum")
    ask_timeout = forms.IntegerField(required=False, min_value=1, help_text="seconds; empty: the global default")
    deferred_timeout = forms.IntegerField(required=False, min_value=1, help_text="seconds, deferred headless asks")
    remind_after = forms.IntegerField(required=False, min_value=1, help_text="seconds; remind the same people")
    escalate_after = forms.IntegerField(required=False, min_value=1, help_text="seconds; escalate to on call")
    on_call_group = forms.RegexField(r"^[A-Za-z0-9_-]*$", required=False, max_length=64)
    unknown_tools = forms.ChoiceField(
        required=False,
        choices=UnknownTools.choices,
        help_text="a call to a tool Gatehouse does not know (a newer Claude Code's)",
    )

    def clean_unknown_tools(self) -> str:
        # Like the checkbox beside it, a field left out of the post means its default.
        return str(self.cleaned_data.get("unknown_tools") or UnknownTools.ASK)


class TeamGroupsForm(forms.Form):
    """The team's groups, one a line: `leads: alice, carol`."""

    groups = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="one group a line: name: member, member (an empty list empties the group)",
    )

    def clean_groups(self) -> dict[str, list[str]]:
        parsed: dict[str, list[str]] = {}
        for number, line in enumerate(str(self.cleaned_data.get("groups") or "").splitlines(), start=1):
            if not line.strip():
                continue
            name, colon, members = line.partition(":")
            if not colon or not name.strip():
                raise forms.ValidationError(f"line {number}: write it as 'group: member, member'")
            parsed[name.strip()] = [m.strip() for m in members.split(",") if m.strip()]
        return parsed
