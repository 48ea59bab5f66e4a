"""Rules over HTTP: list, create, read, update, delete, and explain a call (dry run)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

import policy
from approvals import permissions, selectors, services
from approvals.api.common import ApiView, IsPerson, QuerySerializer, StrictSerializer, without_nul
from approvals.api.shapes import ErrorSerializer
from approvals.models import PERSON_SOURCES, Context, Mode, Role, Rule, RuleBehavior, RuleScope, RuleSource, Team

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer}


class RuleOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    rule = serializers.CharField()
    behavior = serializers.ChoiceField(choices=RuleBehavior.choices)
    source = serializers.ChoiceField(choices=RuleSource.choices)  # type: ignore[assignment]
    scope = serializers.ChoiceField(choices=RuleScope.choices)
    expires_at = serializers.DateTimeField(allow_null=True)
    note = serializers.CharField()
    created_by = serializers.CharField(allow_null=True, source="created_by.username", default=None)
    agent = serializers.CharField(allow_null=True, source="agent.name", default=None)
    project_path = serializers.CharField()
    session_id = serializers.CharField()
    team = serializers.CharField(source="team.name")
    ask_timeout = serializers.IntegerField(allow_null=True)
    approvals_required = serializers.IntegerField()
    approver_group = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Rule"


class RuleInputSerializer(StrictSerializer):
    rule = serializers.CharField(max_length=4096, help_text="Claude Code syntax, e.g. `Bash(git commit:*)`.")
    behavior = serializers.ChoiceField(choices=RuleBehavior.choices)
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=PERSON_SOURCES, default=RuleSource.LOCAL_SETTINGS
    )
    scope = serializers.ChoiceField(choices=RuleScope.choices, default=RuleScope.GLOBAL)
    agent = serializers.CharField(
        max_length=100,
        required=False,
        allow_null=True,
        default=None,
        help_text="Agent name (scope `agent`, or to narrow a session/project rule).",
    )
    project_path = serializers.CharField(max_length=4096, required=False, allow_blank=True, default="")
    session_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    ask_timeout = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=86_400, default=None)
    approvals_required = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=10,
        default=1,
        help_text="Ask rules: approvals from distinct people the call needs (where several match, the largest wins).",
    )
    approver_group = serializers.RegexField(
        r"^[A-Za-z0-9_-]*$",
        max_length=64,
        required=False,
        allow_blank=True,
        default="",
        help_text="Ask rules: only members of this team group count toward the quorum (e.g. `leads`).",
    )
    note = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    team = serializers.CharField(max_length=64, required=False, help_text="Team name; defaults to your only team.")

    class Meta:
        ref_name = "RuleInput"


def team_for_write(user: User | AnonymousUser, name: str | None) -> Team:
    """The team a rule is written to: the named one, else the caller's only approver team."""
    approver_teams = permissions.team_ids_for(user, role=Role.APPROVER)
    if name:
        team = selectors.team_by_name(name)
        if team is None or not permissions.can_see(user, team.pk):
            raise exceptions.PermissionDenied(f"You are not a member of a team named {name!r}.")
        if approver_teams is not None and team.pk not in approver_teams:
            raise exceptions.PermissionDenied(f"Only approvers of team {name!r} can change its rules.")
        return team
    if approver_teams is None:
        return services.default_team()
    if not approver_teams:
        raise exceptions.PermissionDenied("Only approvers can change rules; you are a viewer.")
    if len(approver_teams) > 1:
        raise exceptions.ValidationError({"team": ["you approve in several teams; name one"]})
    return Team.objects.get(pk=approver_teams[0])


def guard_policy_settings(user: User | AnonymousUser, *sources: str) -> None:
    """policySettings are the organisation's: only a superuser writes them over the API."""
    if RuleSource.POLICY_SETTINGS in sources and not user.is_superuser:
        raise exceptions.PermissionDenied("policySettings rules are managed by an administrator.")


def agent_named(team: Team, name: str | None) -> Any:
    if not name:
        return None
    agent = selectors.agent_in_team(team_id=team.pk, name=name)
    if agent is None:
        raise exceptions.ValidationError({"agent": [f"no agent {name!r} in team {team.name!r}"]})
    return agent


def team_for_read(request: Request, name: str | None) -> Team:
    """The team whose rules a dry run uses: the named one you belong to, else your only team."""
    if name:
        team = selectors.team_by_name(name)
        if team is None or not permissions.can_see(request.user, team.pk):
            raise exceptions.ValidationError({"team": [f"no team {name!r} that you belong to"]})
        return team
    if request.user.is_superuser:
        return services.default_team()
    teams = list(selectors.teams_for(request.user)[:2])
    if len(teams) != 1:
        raise exceptions.ValidationError({"team": ["name the team whose rules to use"]})
    return teams[0]


def visible_rule(request: Request, rule_id: int) -> Rule:
    rule = selectors.rule_get(rule_id)
    if rule is None or not permissions.can_see(request.user, rule.team_id):
        raise exceptions.NotFound(f"No rule {rule_id} that you can see.")
    return rule


def writable_rule(request: Request, rule_id: int) -> Rule:
    rule = visible_rule(request, rule_id)
    if not permissions.can_manage_team(request.user, rule.team_id):
        raise exceptions.PermissionDenied(f"Only approvers of team {rule.team.name!r} can change its rules.")
    guard_policy_settings(request.user, rule.source)
    return rule


def service_call(func: Any, **kwargs: Any) -> Any:
    """Call a rule service, turning its ServiceError (e.g. the engine's syntax message) into a 400."""
    try:
        return func(**kwargs)
    except services.ServiceError as exc:
        raise exceptions.ValidationError({"rule": [str(exc)]}) from None


class RuleListApi(ApiView):
    permission_classes = [IsPerson]

    class FilterSerializer(QuerySerializer):
        source = serializers.ChoiceField(choices=RuleSource.choices, required=False)  # type: ignore[assignment]
        behavior = serializers.ChoiceField(choices=RuleBehavior.choices, required=False)
        scope = serializers.ChoiceField(choices=RuleScope.choices, required=False)
        team = serializers.CharField(max_length=64, required=False)

        class Meta:
            ref_name = "RuleFilter"

    @extend_schema(
        operation_id="rules_list",
        parameters=[FilterSerializer],
        responses={200: RuleOutputSerializer(many=True), **ERRORS},
        description="Rules of your teams (people only).",
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        rules = selectors.rules_filtered(request.user, **filters.validated_data)
        return Response(RuleOutputSerializer(rules, many=True).data)


class RuleCreateApi(ApiView):
    permission_classes = [IsPerson]

    @extend_schema(
        operation_id="rules_create",
        request=RuleInputSerializer,
        responses={201: RuleOutputSerializer, **ERRORS},
        description="Add a rule (approvers; policySettings only for administrators). "
        "An invalid rule string is a 400 carrying the engine's message.",
    )
    def post(self, request: Request) -> Response:
        serializer = RuleInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        team = team_for_write(request.user, data.pop("team", None))
        guard_policy_settings(request.user, data["source"])
        data["agent"] = agent_named(team, data["agent"])
        rule = service_call(services.rule_create, team=team, created_by=request.user, **data)
        return Response(RuleOutputSerializer(rule).data, status=201)


class RuleCollectionApi(RuleListApi, RuleCreateApi):
    """Only what drf-spectacular documents for `/rules`; requests go to the two views above."""


class RuleDetailApi(ApiView):
    permission_classes = [IsPerson]

    @extend_schema(operation_id="rules_retrieve", responses={200: RuleOutputSerializer, **ERRORS})
    def get(self, request: Request, rule_id: int) -> Response:
        return Response(RuleOutputSerializer(visible_rule(request, rule_id)).data)


class RuleUpdateApi(ApiView):
    permission_classes = [IsPerson]

    class InputSerializer(RuleInputSerializer):
        class Meta:
            ref_name = "RuleUpdate"

    def _update(self, request: Request, rule_id: int, *, partial: bool) -> Response:
        rule = writable_rule(request, rule_id)
        serializer = self.InputSerializer(data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        changes = dict(serializer.validated_data)
        if "team" in changes and changes.pop("team") != rule.team.name:
            raise exceptions.ValidationError({"team": ["a rule cannot move to another team; delete and re-create it"]})
        guard_policy_settings(request.user, changes.get("source", ""))
        if "agent" in changes:
            changes["agent"] = agent_named(rule.team, changes["agent"])
        if "rule" in changes:
            changes["rule_text"] = changes.pop("rule")
        updated = service_call(services.rule_update, rule=rule, **changes)
        return Response(RuleOutputSerializer(updated).data)

    @extend_schema(
        operation_id="rules_partial_update", request=InputSerializer, responses={200: RuleOutputSerializer, **ERRORS}
    )
    def patch(self, request: Request, rule_id: int) -> Response:
        return self._update(request, rule_id, partial=True)

    @extend_schema(
        operation_id="rules_update", request=InputSerializer, responses={200: RuleOutputSerializer, **ERRORS}
    )
    def put(self, request: Request, rule_id: int) -> Response:
        return self._update(request, rule_id, partial=False)


class RuleDeleteApi(ApiView):
    permission_classes = [IsPerson]

    @extend_schema(operation_id="rules_destroy", responses={204: None, **ERRORS})
    def delete(self, request: Request, rule_id: int) -> Response:
        services.rule_delete(rule=writable_rule(request, rule_id))
        return Response(status=204)


class RuleItemApi(RuleDetailApi, RuleUpdateApi, RuleDeleteApi):
    """Only what drf-spectacular documents for `/rules/{id}`; requests go to the views above."""


class RuleExplainApi(ApiView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictSerializer):
        tool_name = serializers.CharField(max_length=200)
        tool_input = serializers.JSONField(required=False, default=dict)
        cwd = serializers.CharField(max_length=4096, required=False, allow_blank=True, default="")
        mode = serializers.ChoiceField(choices=Mode.choices, required=False, default=Mode.DEFAULT)
        context = serializers.ChoiceField(  # type: ignore[assignment]
            choices=Context.choices, required=False, default=Context.INTERACTIVE
        )
        session_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        additional_directories = serializers.ListField(
            child=serializers.CharField(max_length=4096), required=False, max_length=100, default=list
        )
        home = serializers.CharField(max_length=4096, required=False)
        pre_tool_use_hooks = serializers.ListField(child=serializers.DictField(), required=False, max_length=20)
        agent = serializers.CharField(max_length=100, required=False, help_text="Apply this agent's scoped rules too.")
        team = serializers.CharField(max_length=64, required=False, help_text="Team name; defaults to your only team.")
        rules = serializers.ListField(
            child=serializers.DictField(),
            required=False,
            default=list,
            max_length=200,
            help_text="Extra rules to try, as `python -m policy decide` takes them; nothing is saved.",
        )

        class Meta:
            ref_name = "RuleExplainInput"

        def validate_tool_input(self, value: Any) -> dict[str, Any]:
            if not isinstance(value, dict):
                raise serializers.ValidationError("tool_input must be a JSON object")
            without_nul(value)
            return value

    class OutputSerializer(serializers.Serializer):
        behavior = serializers.ChoiceField(choices=["allow", "deny", "ask"])
        reason = serializers.DictField()
        message = serializers.CharField()
        updated_input = serializers.JSONField(allow_null=True)
        warnings = serializers.ListField(child=serializers.CharField())
        trace = serializers.ListField(child=serializers.DictField())
        suggested_rules = serializers.ListField(child=serializers.CharField())
        destructive_warning = serializers.CharField(allow_null=True)
        tool_name = serializers.CharField(allow_null=True)
        rules_considered = RuleOutputSerializer(many=True)

        class Meta:
            ref_name = "RuleExplanation"

    @extend_schema(
        operation_id="rules_explain",
        request=InputSerializer,
        responses={200: OutputSerializer, **ERRORS},
        description="Run the decision pipeline as a dry run with the team's rules; returns the decision and "
        "its trace. Writes nothing.",
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        call = dict(serializer.validated_data)
        team = team_for_read(request, call.pop("team", None))
        agent = agent_named(team, call.pop("agent", None))
        extra = call.pop("rules")
        call["permission_mode"] = call.pop("mode")
        try:
            policy.compile_rules(extra)
        except (policy.RuleSyntaxError, ValueError, TypeError, KeyError) as exc:
            raise exceptions.ValidationError({"rules": [f"invalid rule: {exc}"]}) from None
        verdict, considered = selectors.explain_call(team_id=team.pk, agent=agent, call=call, extra_rules=extra)
        data = verdict.to_dict()
        data.pop("denial_state", None)
        data.pop("tool_input", None)
        data["rules_considered"] = RuleOutputSerializer(considered, many=True).data
        return Response(data)
