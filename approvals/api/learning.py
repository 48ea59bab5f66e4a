"""Learning from the audit log over HTTP: what-if replay of a draft, and rule suggestions."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core import signing
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import learning, permissions, selectors, services
from approvals.api.common import ApiView, IsPerson, QuerySerializer, StrictSerializer
from approvals.api.rules import ERRORS, RuleInputSerializer, RuleOutputSerializer, agent_named, team_for_read
from approvals.models import PERSON_SOURCES, Rule, RuleBehavior, RuleScope, Team

CURSOR_SALT = "gatehouse.rules.what-if"
MAX_DRAFT_RULES = 200


class DraftReplaceSerializer(StrictSerializer):
    id = serializers.IntegerField(min_value=1)
    rule = serializers.CharField(max_length=4096, required=False)
    behavior = serializers.ChoiceField(choices=RuleBehavior.choices, required=False)
    source = serializers.ChoiceField(choices=PERSON_SOURCES, required=False)  # type: ignore[assignment]
    scope = serializers.ChoiceField(choices=RuleScope.choices, required=False)
    agent = serializers.CharField(max_length=100, required=False, allow_null=True)
    project_path = serializers.CharField(max_length=4096, required=False, allow_blank=True)
    session_id = serializers.CharField(max_length=200, required=False, allow_blank=True)
    expires_at = serializers.DateTimeField(required=False, allow_null=True)

    class Meta:
        ref_name = "RuleDraftReplace"


def _draft_rule(team: Team, fields: dict[str, Any], base: Rule | None = None) -> Rule:
    """An unsaved rule from a draft's fields (over `base` for a replacement), checked as
    `rule_create` checks it."""
    values: dict[str, Any] = {
        "rule": base.rule if base else "",
        "behavior": base.behavior if base else "",
        "source": base.source if base else "localSettings",
        "scope": base.scope if base else RuleScope.GLOBAL,
        "agent": base.agent if base else None,
        "project_path": base.project_path if base else "",
        "session_id": base.session_id if base else "",
        "expires_at": base.expires_at if base else None,
    }
    values.update({k: v for k, v in fields.items() if k in values})
    if "agent" in fields:
        values["agent"] = agent_named(team, fields["agent"])
    try:
        values["rule"] = services.rule_validate(**{k: v for k, v in values.items() if k != "expires_at"})
    except services.ServiceError as exc:
        raise exceptions.ValidationError({"rule": [str(exc)]}) from None
    return Rule(team=team, pk=base.pk if base else None, **values)


def draft_from(team: Team, data: dict[str, Any]) -> learning.Draft:
    """The draft a what-if body describes; ids must name rules of the team."""
    known = {r.pk: r for r in selectors.rules_of_team(team.pk)}
    named = list(data["remove"]) + [item["id"] for item in data["replace"]]
    missing = sorted({pk for pk in named if pk not in known})
    if missing:
        raise exceptions.ValidationError({"remove": [f"no rule {pk} in team {team.name!r}" for pk in missing]})
    replace = {item["id"]: _draft_rule(team, item, known[item["id"]]) for item in data["replace"]}
    add = [_draft_rule(team, item) for item in data["add"]]
    return learning.Draft(add=add, remove=frozenset(data["remove"]), replace=replace)


class ChangedSerializer(serializers.Serializer):
    request_id = serializers.UUIDField()
    tool_name = serializers.CharField()
    tool_input = serializers.JSONField()
    old = serializers.ChoiceField(choices=["allow", "deny", "ask"])
    new = serializers.ChoiceField(choices=["allow", "deny", "ask"])
    human = serializers.ChoiceField(choices=["allow", "deny"], allow_null=True)

    class Meta:
        ref_name = "RuleWhatIfChange"


class RuleWhatIfApi(ApiView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictSerializer):
        add = serializers.ListField(
            child=RuleInputSerializer(), required=False, default=list, max_length=MAX_DRAFT_RULES
        )
        remove = serializers.ListField(
            child=serializers.IntegerField(min_value=1), required=False, default=list, max_length=MAX_DRAFT_RULES
        )
        replace = serializers.ListField(
            child=DraftReplaceSerializer(), required=False, default=list, max_length=MAX_DRAFT_RULES
        )
        since = serializers.DateTimeField()
        until = serializers.DateTimeField(required=False, allow_null=True, default=None)
        team = serializers.CharField(max_length=64, required=False, help_text="Team name; defaults to your only team.")

        class Meta:
            ref_name = "RuleWhatIfInput"

    class PageSerializer(QuerySerializer):
        cursor = serializers.CharField(max_length=500, required=False)
        limit = serializers.IntegerField(min_value=1, max_value=500, required=False, default=50)

        class Meta:
            ref_name = "RuleWhatIfPage"

    class OutputSerializer(serializers.Serializer):
        counts = serializers.DictField(child=serializers.IntegerField(), help_text='e.g. {"ask->allow": 12}')
        changed = ChangedSerializer(many=True)
        flagged = serializers.IntegerField(help_text="Changed to allow where a person had denied the call.")
        uncertain = serializers.IntegerField(help_text="Changed calls whose outcome depends on paths or home.")
        next = serializers.CharField(allow_null=True, help_text="Pass as ?cursor= for the next page of `changed`.")

        class Meta:
            ref_name = "RuleWhatIf"

    @extend_schema(
        operation_id="rules_what_if",
        request=InputSerializer,
        parameters=[PageSerializer],
        responses={200: OutputSerializer, **ERRORS},
        description="Replay the team's recorded calls with a draft of rule changes and return what would change. "
        "Writes nothing. Any member of the team may run it.",
    )
    def post(self, request: Request) -> Response:
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        page = self.PageSerializer(data=request.query_params)
        page.is_valid(raise_exception=True)
        data = body.validated_data
        team = team_for_read(request, data.get("team"))
        until, offset = _position(page.validated_data.get("cursor"), data["until"])
        limit = page.validated_data["limit"]
        found = learning.what_if(
            team_id=team.pk, draft=draft_from(team, data), since=data["since"], until=until, offset=offset, limit=limit
        )
        more = found.total_changed > offset + limit
        return Response(
            {
                "counts": dict(found.counts),
                "changed": ChangedSerializer([vars(c) for c in found.changed], many=True).data,
                "flagged": found.flagged,
                "uncertain": found.uncertain,
                "next": _cursor(until, offset + limit) if more else None,
            }
        )


def _position(cursor: str | None, until: datetime | None) -> tuple[datetime, int]:
    """Where a page starts: the first page pins `until` (now, if open), so pages agree."""
    if not cursor:
        return until or timezone.now(), 0
    try:
        state = signing.loads(cursor, salt=CURSOR_SALT)
        return datetime.fromisoformat(state["until"]), int(state["offset"])
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        raise exceptions.ValidationError({"cursor": ["not a cursor this server gave out"]}) from None


def _cursor(until: datetime, offset: int) -> str:
    return signing.dumps({"until": until.isoformat(), "offset": offset}, salt=CURSOR_SALT)


def team_for_approver(request: Request, name: str | None) -> Team:
    """A team whose suggestions and autopilot the caller may see: approvers only."""
    team = team_for_read(request, name)
    if not permissions.can_manage_team(request.user, team.pk):
        raise exceptions.PermissionDenied(f"Only approvers of team {team.name!r} see its suggestions and autopilot.")
    return team


class EvidenceSerializer(serializers.Serializer):
    calls = serializers.IntegerField()
    sessions = serializers.IntegerField()
    people = serializers.IntegerField()
    denials = serializers.IntegerField()

    class Meta:
        ref_name = "RuleSuggestionEvidence"


class RuleSuggestionListApi(ApiView):
    permission_classes = [IsPerson]

    class FilterSerializer(QuerySerializer):
        team = serializers.CharField(max_length=64, required=False)
        since = serializers.DateTimeField(required=False, help_text="Evidence from; default 30 days ago.")
        min_calls = serializers.IntegerField(min_value=2, max_value=1000, required=False, default=3)

        class Meta:
            ref_name = "RuleSuggestionFilter"

    class OutputSerializer(serializers.Serializer):
        rule = serializers.CharField()
        behavior = serializers.ChoiceField(choices=["allow", "deny"])
        evidence = EvidenceSerializer()

        class Meta:
            ref_name = "RuleSuggestion"

    @extend_schema(
        operation_id="rules_suggestions",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), **ERRORS},
        description="Narrow rules that people's repeated answers support (approvers of the team only).",
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        team = team_for_approver(request, data.get("team"))
        now = timezone.now()
        since = data.get("since") or now - timedelta(days=30)
        found = learning.rule_suggestions(team_id=team.pk, since=since, until=now, min_calls=data["min_calls"])
        return Response([s.to_dict() for s in found])


class AutopilotOutputSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.name")
    enabled = serializers.BooleanField()
    approvals = serializers.IntegerField()
    trial_hours = serializers.IntegerField()
    window_days = serializers.IntegerField()

    class Meta:
        ref_name = "Autopilot"


class AutopilotDetailApi(ApiView):
    permission_classes = [IsPerson]

    class FilterSerializer(QuerySerializer):
        team = serializers.CharField(max_length=64, required=False)

        class Meta:
            ref_name = "AutopilotFilter"

    class OutputSerializer(AutopilotOutputSerializer):
        rules = RuleOutputSerializer(many=True, help_text="Its unexpired rules; DELETE /api/v1/rules/{id} revokes one.")

        class Meta:
            ref_name = "AutopilotWithRules"

    @extend_schema(
        operation_id="rules_autopilot_retrieve",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, **ERRORS},
        description="The team's autopilot setting and the rules it saved (approvers of the team only).",
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        team = team_for_approver(request, filters.validated_data.get("team"))
        return Response(autopilot_body(team))


def autopilot_body(team: Team) -> dict[str, Any]:
    setting = selectors.autopilot_setting(team.pk)
    data = dict(AutopilotOutputSerializer(setting).data)
    data["rules"] = RuleOutputSerializer(selectors.autopilot_rules([team.pk]), many=True).data
    return data


class AutopilotUpdateApi(ApiView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictSerializer):
        enabled = serializers.BooleanField()
        approvals = serializers.IntegerField(min_value=2, max_value=100, required=False)
        trial_hours = serializers.IntegerField(min_value=1, max_value=24 * 30, required=False)
        window_days = serializers.IntegerField(min_value=1, max_value=365, required=False)
        team = serializers.CharField(max_length=64, required=False)

        class Meta:
            ref_name = "AutopilotInput"

    @extend_schema(
        operation_id="rules_autopilot_update",
        request=InputSerializer,
        responses={200: AutopilotDetailApi.OutputSerializer, **ERRORS},
        description="Turn the team's autopilot on or off and set when it saves a rule (approvers of the team).",
    )
    def put(self, request: Request) -> Response:
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        team = team_for_approver(request, data.pop("team", None))
        services.autopilot_configure(team=team, **data)
        return Response(autopilot_body(team))


class AutopilotApi(AutopilotDetailApi, AutopilotUpdateApi):
    """Only what drf-spectacular documents for `/rules/autopilot`; requests go to the views above."""
