"""The chat-route API: each team's own Telegram chat and Slack channel, and their approvers.

`GET /api/v1/teams/{team}/chat-routes`, `PUT` and `DELETE /api/v1/teams/{team}/chat-routes/{surface}`,
for the team's admins (`approvals.permissions.is_team_admin`): a chat route is a team setting.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import permissions
from approvals import selectors as approval_selectors
from approvals.api.common import ApiView, IsPerson, StrictSerializer
from approvals.api.rules import ERRORS
from approvals.models import Team
from approvals.services import ServiceError
from relay.bridges import selectors, services
from relay.models import ChatRoute


def team_for_manager(request: Request, name: str) -> Team:
    """The named team if the caller sees it (else 404) and is its admin (else 403)."""
    team = approval_selectors.teams_for(request.user).filter(name=name).first()
    if team is None:
        raise exceptions.NotFound(f"No team named {name!r} that you belong to.")
    if not permissions.is_team_admin(request.user, team.pk):
        raise exceptions.PermissionDenied(f"Only admins of team {name!r} see and set its chat routes.")
    return team


def known_surface(surface: str) -> str:
    if surface not in ChatRoute.Surface.values:
        raise exceptions.NotFound(f"No chat service {surface!r}; one of {', '.join(ChatRoute.Surface.values)}.")
    return surface


def environment_routes() -> dict[str, selectors.Route | None]:
    """The default team's routes from the environment variables."""
    telegram = settings.TELEGRAM_BOT_TOKEN and settings.TELEGRAM_CHAT_ID
    slack = settings.SLACK_BOT_TOKEN and settings.SLACK_CHANNEL
    return {
        "telegram": selectors.Route(settings.TELEGRAM_CHAT_ID, tuple(settings.TELEGRAM_APPROVERS))
        if telegram
        else None,
        "slack": selectors.Route(settings.SLACK_CHANNEL, tuple(settings.SLACK_APPROVERS)) if slack else None,
    }


class ChatIdField(serializers.RegexField):
    """A chat user id as text ("111", "U0ALICE"): a JSON number is refused, not coerced."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(r"^[A-Za-z0-9_-]{1,64}$", **kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError('must be a string, e.g. "111" or "U0ALICE"')
        return str(super().to_internal_value(data))


class ChatRouteOutputSerializer(serializers.Serializer):
    surface = serializers.ChoiceField(choices=ChatRoute.Surface.choices)
    channel = serializers.CharField(help_text="Telegram chat id or Slack channel id")
    approvers = serializers.ListField(child=serializers.CharField(), help_text="Chat user ids who may decide")
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["team", "environment"], source="from", help_text="a team's own route, or the environment's default"
    )

    class Meta:
        ref_name = "ChatRoute"


class ChatRouteListApi(ApiView):
    permission_classes = [IsPerson]

    @extend_schema(
        operation_id="teams_chat_routes_list",
        responses={200: ChatRouteOutputSerializer(many=True), **ERRORS},
        description="Where the team's asks are posted on each chat service, and who there may decide them.",
    )
    def get(self, request: Request, team: str) -> Response:
        found = team_for_manager(request, team)
        routes = selectors.chat_routes_of(found, defaults=environment_routes())
        return Response(ChatRouteOutputSerializer(routes, many=True).data)


class ChatRouteUpdateApi(ApiView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictSerializer):
        channel = serializers.CharField(max_length=200)
        approvers = serializers.ListField(child=ChatIdField(), max_length=200, allow_empty=True)

        class Meta:
            ref_name = "ChatRouteInput"

    @extend_schema(
        operation_id="teams_chat_routes_update",
        request=InputSerializer,
        responses={200: ChatRouteOutputSerializer, **ERRORS},
        description="Give the team its own chat (or channel) on one service and the chat ids who may decide there.",
    )
    def put(self, request: Request, team: str, surface: str) -> Response:
        found = team_for_manager(request, team)
        known_surface(surface)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            route = services.chat_route_set(team=found, surface=surface, **body.validated_data)
        except ServiceError as exc:
            raise exceptions.ValidationError({"channel": [str(exc)]}) from None
        shown: dict[str, Any] = {"surface": surface, "channel": route.channel, "approvers": route.approvers}
        return Response(ChatRouteOutputSerializer({**shown, "from": "team"}).data)


class ChatRouteDeleteApi(ApiView):
    permission_classes = [IsPerson]

    @extend_schema(
        operation_id="teams_chat_routes_destroy",
        responses={204: None, **ERRORS},
        description="Remove the team's own route on one service (the default team falls back to the environment).",
    )
    def delete(self, request: Request, team: str, surface: str) -> Response:
        found = team_for_manager(request, team)
        if not services.chat_route_delete(team=found, surface=known_surface(surface)):
            raise exceptions.NotFound(f"Team {team!r} has no {surface} route of its own.")
        return Response(status=204)


class ChatRouteItemApi(ChatRouteUpdateApi, ChatRouteDeleteApi):
    """Only what drf-spectacular documents for one route; requests go to the views above."""
