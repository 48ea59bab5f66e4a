"""A team's approval settings over HTTP: quorum, risk classes, deadlines, the ladder, unknown tools, groups."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import permissions, selectors, services
from approvals.api.common import ApiView, IsPerson, StrictSerializer
from approvals.api.shapes import ErrorSerializer
from approvals.models import Team, TeamSettings, UnknownTools

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer}

GROUP_NAME = r"^[A-Za-z0-9_-]*$"


def seconds_field() -> serializers.IntegerField:
    return serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=7 * 86_400)


class TeamSettingsOutputSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.name")
    approvals_required = serializers.IntegerField(help_text="Approvals every ask of the team needs (1: one person).")
    destructive_approvals = serializers.IntegerField(help_text="Approvals a destructive command needs (0: off).")
    protected_path_approvals = serializers.IntegerField(help_text="Approvals a protected path needs (0: off).")
    approver_group = serializers.CharField(help_text="Only this group counts toward the team's quorums.")
    exclude_owner = serializers.BooleanField(help_text="The agent's owner never counts toward its own quorum.")
    ask_timeout = serializers.IntegerField(allow_null=True, help_text="Seconds; null: GATEHOUSE_ASK_TIMEOUT.")
    deferred_timeout = serializers.IntegerField(allow_null=True, help_text="Seconds; null: GATEHOUSE_DEFERRED_TIMEOUT.")
    remind_after = serializers.IntegerField(allow_null=True, help_text="Seconds after the ask; null: no reminder.")
    escalate_after = serializers.IntegerField(allow_null=True, help_text="Seconds after the ask; null: no escalation.")
    on_call_group = serializers.CharField(help_text="The group the ladder escalates to.")
    unknown_tools = serializers.ChoiceField(
        choices=UnknownTools.values,
        help_text="A call to a tool Gatehouse does not know (a newer Claude Code's): ask a person, or deny it.",
    )
    groups = serializers.SerializerMethodField(help_text="Each group of the team and its members.")

    class Meta:
        ref_name = "TeamSettings"

    def get_groups(self, settings: TeamSettings) -> dict[str, list[str]]:
        return selectors.team_groups(settings.team_id)


def managed_team(user: User | AnonymousUser, name: str) -> Team:
    """The named team, if this person manages it (its admins; a superuser manages all)."""
    team = selectors.team_by_name(name)
    if team is None or not permissions.can_see(user, team.pk):
        raise exceptions.NotFound(f"No team {name!r} that you belong to.")
    if not permissions.is_team_admin(user, team.pk):
        raise exceptions.PermissionDenied(f"Only admins of team {name!r} change its settings.")
    return team


def settings_body(team: Team) -> dict[str, Any]:
    current = selectors.team_settings(team.pk)
    current.team = team
    return dict(TeamSettingsOutputSerializer(current).data)


class TeamSettingsDetailApi(ApiView):
    permission_classes = [IsPerson]

    @extend_schema(
        operation_id="team_settings_retrieve",
        responses={200: TeamSettingsOutputSerializer, **ERRORS},
        description="The team's approval settings (members of the team).",
    )
    def get(self, request: Request, name: str) -> Response:
        team = selectors.team_by_name(name)
        if team is None or not permissions.can_see(request.user, team.pk):
            raise exceptions.NotFound(f"No team {name!r} that you belong to.")
        return Response(settings_body(team))


class TeamSettingsUpdateApi(ApiView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictSerializer):
        approvals_required = serializers.IntegerField(required=False, min_value=1, max_value=10)
        destructive_approvals = serializers.IntegerField(required=False, min_value=0, max_value=10)
        protected_path_approvals = serializers.IntegerField(required=False, min_value=0, max_value=10)
        approver_group = serializers.RegexField(GROUP_NAME, max_length=64, required=False, allow_blank=True)
        exclude_owner = serializers.BooleanField(required=False)
        ask_timeout = seconds_field()
        deferred_timeout = seconds_field()
        remind_after = seconds_field()
        escalate_after = seconds_field()
        on_call_group = serializers.RegexField(GROUP_NAME, max_length=64, required=False, allow_blank=True)
        unknown_tools = serializers.ChoiceField(choices=UnknownTools.values, required=False)

        class Meta:
            ref_name = "TeamSettingsUpdate"

    @extend_schema(
        operation_id="team_settings_partial_update",
        request=InputSerializer,
        responses={200: TeamSettingsOutputSerializer, **ERRORS},
        description="Change the team's approval settings (team admins). Every ladder step must fall "
        "inside the team's deadline, or it is a 400.",
    )
    def patch(self, request: Request, name: str) -> Response:
        team = managed_team(request.user, name)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            services.team_settings_update(team=team, **serializer.validated_data)
        except services.ServiceError as exc:
            raise exceptions.ValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(settings_body(team))


class TeamSettingsApi(TeamSettingsDetailApi, TeamSettingsUpdateApi):
    """Only what drf-spectacular documents for `/teams/{name}/settings`; requests go to the views above."""


class TeamGroupUpdateApi(ApiView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictSerializer):
        members = serializers.ListField(child=serializers.CharField(max_length=150), max_length=500)

        class Meta:
            ref_name = "TeamGroupUpdate"

    @extend_schema(
        operation_id="team_groups_update",
        request=InputSerializer,
        responses={200: TeamSettingsOutputSerializer, **ERRORS},
        description="Make exactly these members of the team the members of one of its groups "
        "(`leads`, `on_call`; team admins). An empty list empties the group.",
    )
    def put(self, request: Request, name: str, group: str) -> Response:
        team = managed_team(request.user, name)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            services.team_group_set(team=team, group=group, usernames=serializer.validated_data["members"])
        except services.ServiceError as exc:
            raise exceptions.ValidationError({"members": [str(exc)]}) from None
        return Response(settings_body(team))
