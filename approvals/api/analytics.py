"""`GET /api/v1/analytics/approvers`: how each person decides, for the teams the caller sees."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import permissions, selectors
from approvals.api.common import ApiView, IsPerson, QuerySerializer
from approvals.api.rules import ERRORS


class ApproverAnalyticsApi(ApiView):
    permission_classes = [IsPerson]

    class FilterSerializer(QuerySerializer):
        team = serializers.CharField(max_length=64, required=False, help_text="One team; default: all of yours.")
        since = serializers.DateTimeField(required=False, help_text="Decisions from; default 30 days ago.")
        until = serializers.DateTimeField(required=False, help_text="Decisions before; default now.")

        class Meta:
            ref_name = "ApproverAnalyticsFilter"

    class OutputSerializer(serializers.Serializer):
        class ApproverSerializer(serializers.Serializer):
            user = serializers.CharField()
            decisions = serializers.IntegerField()
            allowed = serializers.IntegerField()
            denied = serializers.IntegerField()
            approval_rate = serializers.FloatField(help_text="allowed / decisions")
            median_ms = serializers.FloatField(help_text="Median time from the ask to this person's decision.")
            p90_ms = serializers.FloatField()
            destructive_decisions = serializers.IntegerField()
            destructive_under_2s = serializers.IntegerField(help_text="Rubber-stamp signal: decided in under 2 s.")
            destructive_allowed_under_2s = serializers.IntegerField()

            class Meta:
                ref_name = "ApproverStats"

        since = serializers.DateTimeField()
        until = serializers.DateTimeField()
        approvers = ApproverSerializer(many=True)

        class Meta:
            ref_name = "ApproverAnalytics"

    @extend_schema(
        operation_id="analytics_approvers",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, **ERRORS},
        description="Per person who answered asks of your teams: time to decision (median, p90), approval "
        "rate, and decisions on destructive cards made in under 2 s (a rubber-stamp signal).",
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        until = data.get("until") or timezone.now()
        since = data.get("since") or until - timedelta(days=30)
        if since >= until:
            raise exceptions.ValidationError({"since": ["must be before until"]})
        team_id = None
        if data.get("team"):
            team = selectors.team_by_name(data["team"])
            if team is None or not permissions.can_see(request.user, team.pk):
                raise exceptions.NotFound(f"No team {data['team']!r} that you belong to.")
            team_id = team.pk
        found = selectors.approver_stats(request.user, since, until, team_id=team_id)
        body = {"since": since, "until": until, "approvers": [s.to_dict() for s in found]}
        return Response(self.OutputSerializer(body).data)
