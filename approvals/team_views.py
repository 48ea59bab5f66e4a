"""The team settings page: quorum, risk classes, deadlines, the ladder, unknown tools and groups (team admins)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect

from approvals import permissions, selectors, services
from approvals.forms import TeamGroupsForm, TeamSettingsForm
from approvals.pages import render_page
from approvals.services.settings import EDITABLE


@login_required
def team_settings(request: HttpRequest, name: str) -> HttpResponse:
    team = selectors.team_by_name(name)
    if team is None or not permissions.can_see(request.user, team.pk):
        raise Http404("No such team.")
    if not permissions.is_team_admin(request.user, team.pk):
        return HttpResponseForbidden("Only the team's admins change its settings.")
    current = selectors.team_settings(team.pk)
    initial = {field: getattr(current, field) for field in EDITABLE}
    groups_text = "\n".join(
        f"{group}: {', '.join(members)}" for group, members in selectors.team_groups(team.pk).items()
    )
    posted = request.POST if request.method == "POST" else None
    form = TeamSettingsForm(posted, initial=initial)
    groups = TeamGroupsForm(posted, initial={"groups": groups_text})
    if posted is not None and form.is_valid() and groups.is_valid():
        try:
            services.team_settings_update(team=team, **form.cleaned_data)
            for group, members in groups.cleaned_data["groups"].items():
                services.team_group_set(team=team, group=group, usernames=members)
        except services.ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Saved the settings of team {team.name}.")
            return redirect("team-settings", name=team.name)
    context = {"team": team, "form": form, "groups": groups}
    return render_page(request, "approvals/team_settings.html", context, status=400 if posted is not None else 200)
