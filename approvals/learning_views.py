"""The rules page's learning parts: a draft's what-if, suggestions and the autopilot.

Function views like `approvals.views`; the what-if answers a server-rendered partial
that `static/rules.js` puts under the form, so a rule's effect is seen before it is saved.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from approvals import learning, selectors, services
from approvals.forms import RuleForm
from approvals.models import Rule, Team

WHAT_IF_DAYS = 30
WHAT_IF_ROWS = 20


def _rule_form(request: HttpRequest, data: Any = None) -> RuleForm:
    teams = selectors.teams_deciding(request.user)
    agents = selectors.agents_visible_to(request.user).filter(team__in=teams, revoked_at__isnull=True)
    return RuleForm(data, teams=teams, agents=agents)


@login_required
@require_POST
def rules_what_if(request: HttpRequest) -> HttpResponse:
    """What the rule in the add form (or a suggestion) would change, as a partial; saves nothing."""
    form = _rule_form(request, request.POST)
    if not form.is_valid():
        return _partial(request, {"errors": _errors(form)}, status=400)
    data = form.cleaned_data
    fields: dict[str, Any] = {k: data.get(k) for k in ("rule", "behavior", "source", "scope", "agent")}
    fields.update(project_path=data.get("project_path") or "", session_id=data.get("session_id") or "")
    try:
        fields["rule"] = services.rule_validate(**fields)
    except services.ServiceError as exc:
        return _partial(request, {"errors": str(exc)}, status=400)
    team: Team = data["team"]
    drafted = Rule(team=team, expires_at=data.get("expires_at"), **fields)
    replaced = _replaced(request, team)
    if replaced is not None:
        drafted.pk = replaced.pk
    draft = learning.Draft(replace={drafted.pk: drafted}) if replaced else learning.Draft(add=[drafted])
    now = timezone.now()
    since = now - timedelta(days=WHAT_IF_DAYS)
    found = learning.what_if(team_id=team.pk, draft=draft, since=since, until=now, offset=0, limit=WHAT_IF_ROWS)
    rows = [{**vars(c), "input": json.dumps(c.tool_input, sort_keys=True)} for c in found.changed]
    counts = sorted(found.counts.items())  # a Counter answers 0 to a template's `.items` lookup
    context = {"found": found, "counts": counts, "rule": fields["rule"], "days": WHAT_IF_DAYS, "rows": rows}
    return _partial(request, context)


def _replaced(request: HttpRequest, team: Team) -> Rule | None:
    """The saved rule the edit form changes (`replace` = its id), if it is the team's."""
    rule_id = request.POST.get("replace", "")
    if not rule_id.isdigit():
        return None
    return selectors.rules_of_team(team.pk).filter(pk=int(rule_id)).first()


def _errors(form: forms.Form) -> str:
    return "; ".join(f"{name}: {' '.join(str(e) for e in errors)}" for name, errors in form.errors.items())


def _partial(request: HttpRequest, context: dict[str, Any], *, status: int = 200) -> HttpResponse:
    return render(request, "approvals/_what_if.html", context, status=status)


class AutopilotForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none())
    enabled = forms.BooleanField(required=False, label="Autopilot on")
    approvals = forms.IntegerField(min_value=2, max_value=100, help_text="approvals from as many sessions")
    trial_hours = forms.IntegerField(min_value=1, max_value=24 * 30, help_text="hours a rule it saves lives")
    window_days = forms.IntegerField(min_value=1, max_value=365, help_text="days of evidence read")


@login_required
@require_POST
def autopilot_settings(request: HttpRequest) -> HttpResponse:
    """Turn a team's autopilot on or off (approvers of that team)."""
    form = AutopilotForm(request.POST)
    form.fields["team"].queryset = selectors.teams_deciding(request.user)  # type: ignore[attr-defined]
    if not form.is_valid():
        return HttpResponseForbidden("Only approvers of a team set its autopilot, with values in range.")
    data = dict(form.cleaned_data)
    team = data.pop("team")
    services.autopilot_configure(team=team, **data)
    messages.success(request, f"Autopilot {'on' if data['enabled'] else 'off'} for team {team.name}.")
    return redirect("/rules/#autopilot")


def rules_page_learning(request: HttpRequest) -> dict[str, Any]:
    """What the rules page shows of the learning: suggestions, the autopilot and its feed."""
    teams = list(selectors.teams_deciding(request.user))
    now = timezone.now()
    suggestions = [
        {"team": team, "suggestion": found}
        for team in teams
        for found in learning.rule_suggestions(team_id=team.pk, since=now - timedelta(days=30), until=now)[:10]
    ]
    autopilot = [
        {"team": team, "setting": selectors.autopilot_setting(team.pk), "rules": selectors.autopilot_rules([team.pk])}
        for team in teams
    ]
    return {
        "suggestions": suggestions,
        "autopilot": autopilot,
        "autopilot_feed": selectors.autopilot_approvals(request.user),
    }
