"""The stop switch over the API: `/api/v1/pauses` (list, pause) and `/api/v1/pauses/{id}` (resume)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import permissions, selectors, services
from approvals.api.common import ApiView, IsPerson, StrictSerializer, surface_of
from approvals.api.rules import ERRORS
from approvals.models import PauseAnswer, Team


class PauseOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(source="team.name")
    agent = serializers.CharField(source="agent.name", allow_null=True, default=None)
    answer = serializers.ChoiceField(choices=PauseAnswer.values)
    note = serializers.CharField()
    paused_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Pause"


def _admin_team(request: Request, name: str | None) -> Team:
    """The named team (or the caller's only one) where the caller is a team admin."""
    if name:
        team = selectors.team_by_name(name)
        if team is None or not permissions.can_see(request.user, team.pk):
            raise exceptions.NotFound(f"No team {name!r} that you belong to.")
    else:
        teams = list(selectors.teams_for(request.user)[:2])
        if len(teams) != 1:
            raise exceptions.ValidationError({"team": ["name the team"]})
        team = teams[0]
    if not permissions.is_team_admin(request.user, team.pk):
        raise exceptions.PermissionDenied(f"Only an admin of team {team.name!r} can pause or resume it.")
    return team


class PauseListApi(ApiView):
    permission_classes = [IsPerson]

    @extend_schema(
        operation_id="pauses_list",
        responses={200: PauseOutputSerializer(many=True), **ERRORS},
        description="The stop switches in force in your teams.",
    )
    def get(self, request: Request) -> Response:
        return Response(PauseOutputSerializer(selectors.pauses_visible_to(request.user), many=True).data)


class PauseCreateApi(ApiView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictSerializer):
        team = serializers.CharField(max_length=64, required=False, help_text="Defaults to your only team.")
        agent = serializers.CharField(max_length=100, required=False, help_text="One agent; omit for the team.")
        answer = serializers.ChoiceField(choices=PauseAnswer.values, default=PauseAnswer.DENY)
        note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")

        class Meta:
            ref_name = "PauseInput"

    @extend_schema(
        operation_id="pauses_create",
        request=InputSerializer,
        responses={201: PauseOutputSerializer, **ERRORS},
        description="A team admin pauses one agent or the whole team: every call is answered `deny` "
        "(or `ask`: a person decides each) at once until resumed. Audited.",
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data: dict[str, Any] = serializer.validated_data
        team = _admin_team(request, data.get("team"))
        agent = None
        if data.get("agent"):
            agent = selectors.agent_in_team(team_id=team.pk, name=data["agent"])
            if agent is None:
                raise exceptions.ValidationError({"agent": [f"no agent {data['agent']!r} in team {team.name!r}"]})
        pause = services.pause_set(
            team=team,
            agent=agent,
            answer=data["answer"],
            user=request.user,  # type: ignore[arg-type]  # IsPerson: a User
            surface=surface_of(request),
            note=data["note"],
        )
        return Response(PauseOutputSerializer(pause).data, status=status.HTTP_201_CREATED)


class PauseDeleteApi(ApiView):
    permission_classes = [IsPerson]

    @extend_schema(
        operation_id="pauses_delete",
        responses={204: None, **ERRORS},
        description="A team admin resumes what this pause stopped. Audited.",
    )
    def delete(self, request: Request, pause_id: int) -> Response:
        pause = selectors.pauses_visible_to(request.user).filter(pk=pause_id).first()
        if pause is None:
            raise exceptions.NotFound(f"No pause {pause_id} in your teams.")
        _admin_team(request, pause.team.name)
        try:
            services.pause_lift(pause=pause, user=request.user, surface=surface_of(request))  # type: ignore[arg-type]
        except services.ServiceError as exc:
            raise exceptions.NotFound(str(exc)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class PauseCollectionApi(PauseListApi, PauseCreateApi):
    """Only what drf-spectacular documents for `/pauses`; requests go to the two views above."""
