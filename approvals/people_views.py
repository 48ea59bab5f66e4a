"""The people page: a team admin invites people, changes their roles and removes them.

Function views like `approvals.views`. Every action names the team and is checked
against `permissions.is_team_admin`; a team admin cannot change or remove themselves
(another admin or a superuser can), nor a superuser.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from approvals import permissions, selectors, services
from approvals.forms import PersonInviteForm
from approvals.models import Membership, Role, Team
from approvals.pages import render_page


def _admin_team_or_404(request: HttpRequest, team_name: str) -> Team:
    team = selectors.team_by_name(team_name)
    if team is None or not permissions.can_see(request.user, team.pk):
        raise Http404("No such team.")
    return team


@login_required
def people(request: HttpRequest) -> HttpResponse:
    """The members of every team the person administers; POST invites one (link shown once)."""
    teams = selectors.teams_administered(request.user)
    if not teams.exists():
        return HttpResponseForbidden("Only a team admin manages people.")
    form = PersonInviteForm(teams=teams)
    invited = None
    if request.method == "POST":
        form = PersonInviteForm(request.POST, teams=teams)
        if form.is_valid():
            invited = _invite(request, form)
            if invited is not None:
                form = PersonInviteForm(teams=teams)
    context = {
        "teams": [{"team": team, "members": _rows(request, team)} for team in teams],
        "form": form,
        "invited": invited,
        "roles": Role.choices,
    }
    response = render_page(request, "approvals/people.html", context, status=400 if form.errors else 200)
    if invited and invited.get("link"):
        response.headers["Cache-Control"] = "no-store"
    return response


def _invite(request: HttpRequest, form: PersonInviteForm) -> dict[str, Any] | None:
    data = form.cleaned_data
    try:
        user = services.person_add(username=data["username"], team=data["team"], role=data["role"], email=data["email"])
    except services.ServiceError as exc:
        form.add_error("username", str(exc))
        return None
    # Rendered into this response only: the link is never stored, nor shown again.
    link = None if user.has_usable_password() else services.person_login_link(user=user)
    days = settings.PASSWORD_RESET_TIMEOUT // 86_400
    return {"user": user, "team": data["team"], "role": data["role"], "link": link, "days": days}


def _rows(request: HttpRequest, team: Team) -> list[dict[str, Any]]:
    return [
        {"membership": membership, "can_change": _may_change(request, membership)}
        for membership in selectors.team_members(team)
    ]


def _may_change(request: HttpRequest, membership: Membership) -> bool:
    """Not yourself (another admin must), and a superuser only by a superuser."""
    if membership.user_id == request.user.pk:
        return False
    return request.user.is_superuser or not membership.user.is_superuser


def _member_to_change(request: HttpRequest, team_name: str, user_id: int) -> tuple[Team, Membership]:
    team = _admin_team_or_404(request, team_name)
    membership = selectors.member_of(team, user_id)
    if membership is None:
        raise Http404("No such member.")
    return team, membership


@login_required
@require_POST
def person_role(request: HttpRequest, team_name: str, user_id: int) -> HttpResponse:
    team, membership = _member_to_change(request, team_name, user_id)
    if not permissions.is_team_admin(request.user, team.pk):
        return HttpResponseForbidden(f"Only an admin of team {team.name!r} changes its people's roles.")
    if not _may_change(request, membership):
        return HttpResponseForbidden("You cannot change your own role here, nor a superuser's.")
    role = request.POST.get("role", "")
    try:
        services.person_role_change(user=membership.user, team=team, role=role)
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{membership.user.get_username()} is now {role} in {team.name}.")
    return redirect("people")


@login_required
@require_POST
def person_remove(request: HttpRequest, team_name: str, user_id: int) -> HttpResponse:
    team, membership = _member_to_change(request, team_name, user_id)
    if not permissions.is_team_admin(request.user, team.pk):
        return HttpResponseForbidden(f"Only an admin of team {team.name!r} removes its people.")
    if not _may_change(request, membership):
        return HttpResponseForbidden("You cannot remove yourself here, nor a superuser.")
    services.person_remove(user=membership.user, team=team)
    messages.success(request, f"Removed {membership.user.get_username()} from {team.name}: their open pages closed.")
    return redirect("people")
