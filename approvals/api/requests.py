"""Permission requests over HTTP: submit, list, get (long-poll), cancel, decide."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import permissions, selectors, services
from approvals.api.common import (
    ApiView,
    FieldsBoundOnce,
    IsAgent,
    IsPerson,
    QuerySerializer,
    StrictSerializer,
    surface_of,
    wait_seconds,
    without_nul,
)
from approvals.api.errors import error_body
from approvals.api.longpoll import PendingResponse
from approvals.api.shapes import (
    AuditUnavailableSerializer,
    ConflictSerializer,
    ErrorSerializer,
    RequestOutputSerializer,
    request_output,
)
from approvals.auth import agent_of, body_ahead, read_with_token
from approvals.calls import ToolCallSerializer
from approvals.models import Decision, PermissionRequest, RequestState, Role
from approvals.written import Statement

WAIT_PARAMETER = OpenApiParameter(
    "wait",
    OpenApiTypes.FLOAT,
    description="Seconds to wait for a decision before answering 202 (capped at GATEHOUSE_MAX_WAIT).",
)
ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer}


def audit_unavailable() -> Response:
    """Fail closed: the agent hears a deny when its decision could not be recorded."""
    message = services.AUDIT_UNAVAILABLE
    return Response(
        {
            "decision": {
                "behavior": "deny",
                "reason": {"type": "other", "detail": "audit unavailable"},
                "message": message,
            },
            **error_body("audit_unavailable", message),
        },
        status=503,
    )


def request_response(request: PermissionRequest, decision: Decision | None, *, wait: float = 0) -> Response:
    """200 with the decision, or a 202 the door may turn into a 200 by waiting."""
    payload = request_output(selectors.request_payload(request, decision))
    if decision is None:
        return PendingResponse(payload, request_id=request.pk, wait=wait)
    return Response(payload, status=200)


def already_finished(request: PermissionRequest, decision: Decision | None, holder: str = "") -> Response:
    """409 for every loser, naming the winner and the surface it used."""
    message = request.outcome_sentence(decision, holder=holder or "someone else", late=True)
    if decision is not None:
        extra = {"decided_by": decision.decided_by, "surface": decision.surface}
    else:
        extra = {"decided_by": holder, "surface": ""}
    body = error_body("already_decided", message, **extra)
    body["request"] = RequestOutputSerializer(selectors.request_payload(request, decision)).data
    return Response(body, status=409)


def visible_request(request: Request, request_id: uuid.UUID) -> PermissionRequest:
    """The request if the caller may see it; 404 otherwise, so ids of others do not leak."""
    found = selectors.request_get(request_id)
    agent = agent_of(request)
    if found is not None:
        if agent is not None and found.agent_id == agent.pk:
            return found
        if agent is None and permissions.can_see(request.user, found.team_id):
            return found
    raise exceptions.NotFound(f"No permission request {request_id} that you can see.")


def decidable_request(
    request: Request, request_id: uuid.UUID, rows: list[list[tuple[Any, ...]]] | None = None
) -> PermissionRequest:
    """The request if the caller (a person) may decide it: 404 as `visible_request` when
    they cannot see it, 403 when they may only watch its team.

    - One read of the request and its team's members serves both checks
      (`permissions.request_and_role`): `rows`, what
      `selectors.request_and_members_statements(request_id)` returned with the person's
      token read (`PermissionRequestDecideApi.reads_with_token`), or a read now.
    """
    found, role = permissions.request_and_role(request.user, request_id, rows)
    if found is None:
        raise exceptions.NotFound(f"No permission request {request_id} that you can see.")
    if not permissions.at_least(role, Role.APPROVER):
        raise exceptions.PermissionDenied(
            f"You can see team {found.team.name!r}'s requests but only its {Role.APPROVER}s can decide them."
        )
    return found


class PermissionRequestSubmitApi(ApiView):
    permission_classes = [IsAgent]

    # The one spec of a call, shared with the agent socket and the Claude Code hook.
    InputSerializer = ToolCallSerializer

    def reads_with_token(self, request: Request, digest: str) -> list[Statement]:
        """The call's context, read with the agent's token (approvals.auth)."""
        return services.context_reads_ahead(body_ahead(request._request), digest)

    @extend_schema(
        operation_id="permission_requests_submit",
        parameters=[WAIT_PARAMETER],
        request=InputSerializer,
        responses={
            200: RequestOutputSerializer,
            202: RequestOutputSerializer,
            503: AuditUnavailableSerializer,
            409: ErrorSerializer,
            413: ErrorSerializer,
            **ERRORS,
        },
        description="Submit one proposed tool call (agents only). Replaying a `tool_use_id` returns the same "
        "request; reusing it for a different call is a 409.",
    )
    def post(self, request: Request) -> Response:
        wait = wait_seconds(request)
        agent = agent_of(request)
        assert agent is not None  # IsAgent
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        ahead = read_with_token(request)
        try:
            result = services.request_submit(
                agent=agent, call=dict(serializer.validated_data), read_ahead=ahead[0] if ahead else None
            )
        except services.AuditUnavailable:
            return audit_unavailable()
        except services.ToolUseIdReused as exc:
            return Response(error_body("tool_use_id_reused", str(exc)), status=409)
        return request_response(result.request, result.decision, wait=wait)


class PermissionRequestListApi(ApiView):
    permission_classes = [IsPerson]

    class FilterSerializer(QuerySerializer):
        state = serializers.ChoiceField(choices=RequestState.choices, required=False)
        agent = serializers.CharField(max_length=100, required=False)
        session = serializers.CharField(max_length=200, required=False)
        cursor = serializers.CharField(required=False)
        page_size = serializers.IntegerField(required=False, min_value=1, max_value=500)

        class Meta:
            ref_name = "PermissionRequestFilter"

    class Pagination(CursorPagination):
        ordering = ("-created_at", "-pk")
        page_size = 50
        page_size_query_param = "page_size"
        max_page_size = 500

    @extend_schema(
        operation_id="permission_requests_list",
        parameters=[FilterSerializer],
        responses={200: RequestOutputSerializer(many=True), **ERRORS},
        description="Requests of your teams, newest first (people only). Cursor-paginated: follow `next`.",
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        rows = selectors.requests_filtered(
            request.user, **{key: filters.validated_data.get(key) for key in ("state", "agent", "session")}
        )
        paginator = self.Pagination()
        page = paginator.paginate_queryset(rows, request, view=self) or []
        payloads = [selectors.request_payload(row, selectors.joined_decision(row)) for row in page]
        data = [RequestOutputSerializer(payload).data for payload in payloads]
        return paginator.get_paginated_response(data)


class PermissionRequestCollectionApi(PermissionRequestListApi, PermissionRequestSubmitApi):
    """Only what drf-spectacular documents for the collection URL; requests never reach it.

    The collection URL serves two operations (list, submit) whose views are kept apart;
    the door in `longpoll.py` dispatches between them by method.
    """


class PermissionRequestDetailApi(ApiView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="permission_requests_retrieve",
        parameters=[WAIT_PARAMETER],
        responses={200: RequestOutputSerializer, 202: RequestOutputSerializer, **ERRORS},
        description="One request: 200 once decided, 202 while pending (after waiting up to `wait` seconds). "
        "Its agent and the people who can see its team may read it.",
    )
    def get(self, request: Request, request_id: uuid.UUID) -> Response:
        wait = wait_seconds(request)
        found = visible_request(request, request_id)
        return request_response(found, selectors.decision_for(found), wait=wait)


class PermissionRequestCancelApi(ApiView):
    permission_classes = [IsAgent]

    class InputSerializer(StrictSerializer):
        reason = serializers.CharField(max_length=500, required=False, default="withdrawn by the agent")

        class Meta:
            ref_name = "PermissionRequestCancel"

    @extend_schema(
        operation_id="permission_requests_cancel",
        request=InputSerializer,
        responses={200: RequestOutputSerializer, 409: ConflictSerializer, 503: AuditUnavailableSerializer, **ERRORS},
        description="The owning agent withdraws its pending request; it becomes `cancelled` everywhere.",
    )
    def post(self, request: Request, request_id: uuid.UUID) -> Response:
        found = visible_request(request, request_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            result = services.request_cancel(request=found, reason=serializer.validated_data["reason"])
        except services.AuditUnavailable:
            return audit_unavailable()
        if not result.won:
            return already_finished(result.request, result.decision, result.holder)
        return request_response(result.request, result.decision)


class PermissionRequestDecideApi(ApiView):
    permission_classes = [IsPerson]

    # Made for every decision a person sends: its fields are bound once (a tenth of a
    # millisecond of a decision's CPU before the commit, deep-copying them each time).
    class InputSerializer(FieldsBoundOnce, StrictSerializer):
        behavior = serializers.ChoiceField(choices=["allow", "deny"])
        message = serializers.CharField(
            max_length=services.MAX_ANSWER_MESSAGE_CHARS, required=False, allow_blank=True, default=""
        )
        remember = serializers.ChoiceField(choices=list(services.REMEMBER_CHOICES), required=False, default="once")
        remember_hours = serializers.FloatField(
            required=False,
            allow_null=True,
            min_value=services.MIN_REMEMBER_HOURS,
            max_value=services.MAX_REMEMBER_HOURS,
            default=None,
        )
        updated_input = serializers.JSONField(required=False, allow_null=True, default=None)
        interrupt = serializers.BooleanField(
            required=False,
            default=False,
            help_text="With behavior deny: also stop the agent's turn (Claude Code's interrupt).",
        )
        answers = serializers.DictField(
            child=serializers.JSONField(),
            required=False,
            allow_null=True,
            default=None,
            help_text="An AskUserQuestion call's answers: question text → chosen label (a list for multiSelect).",
        )

        class Meta:
            ref_name = "PermissionRequestDecide"

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if attrs.get("interrupt") and attrs.get("behavior") != "deny":
                raise serializers.ValidationError({"interrupt": "interrupt goes with behavior deny"})
            return attrs

        def validate_answers(self, value: Any) -> dict[str, Any] | None:
            without_nul(value, "answers")
            return value

        def validate_updated_input(self, value: Any) -> dict[str, Any] | None:
            if value is not None and not isinstance(value, dict):
                raise serializers.ValidationError("updated_input must be a JSON object")
            without_nul(value, "updated_input")
            return value

    def reads_with_token(self, request: Request, digest: str, request_id: uuid.UUID) -> list[Statement]:
        """The request and its team's members, read with a person's token (approvals.auth)."""
        return selectors.request_and_members_statements(request_id)

    @extend_schema(
        operation_id="permission_requests_decide",
        request=InputSerializer,
        responses={200: RequestOutputSerializer, 409: ConflictSerializer, 503: AuditUnavailableSerializer, **ERRORS},
        description="An approver of the request's team answers it. The first answer wins (200); "
        "everyone after gets 409 naming who decided and via what.",
    )
    def post(self, request: Request, request_id: uuid.UUID) -> Response:
        found = decidable_request(request, request_id, read_with_token(request))
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            answer = services.Answer(
                behavior=data["behavior"],
                surface=surface_of(request),
                user=request.user,  # type: ignore[arg-type]  # IsPerson: a User
                message=data["message"],
                updated_input=data["updated_input"],
                remember=data["remember"],
                remember_hours=data["remember_hours"],
                answers=data["answers"],
                reason_extra={"interrupt": True} if data["interrupt"] else None,
            )
            result = services.request_decide(found.pk, answer, loaded=found)
        except services.ServiceError as exc:
            raise exceptions.ValidationError({"non_field_errors": [str(exc)]}) from None
        except services.AuditUnavailable:
            return audit_unavailable()
        if not result.won:
            return already_finished(result.request, result.decision, result.holder)
        if result.decision is None and result.vote is not None:
            # A counted approval toward a quorum: recorded, the call still pending.
            return Response(RequestOutputSerializer(selectors.request_payload(result.request)).data, status=200)
        return request_response(result.request, result.decision)


class PermissionRequestBatchDecideApi(ApiView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictSerializer):
        ids = serializers.ListField(child=serializers.UUIDField(), min_length=1, max_length=services.BATCH_LIMIT)
        behavior = serializers.ChoiceField(choices=["allow", "deny"])
        message = serializers.CharField(
            max_length=services.MAX_ANSWER_MESSAGE_CHARS, required=False, allow_blank=True, default=""
        )

        class Meta:
            ref_name = "PermissionRequestBatchDecide"

    class OutputSerializer(serializers.Serializer):
        class ResultSerializer(serializers.Serializer):
            won = serializers.BooleanField()
            message = serializers.CharField()
            request = RequestOutputSerializer()

            class Meta:
                ref_name = "PermissionRequestBatchResult"

        results = ResultSerializer(many=True)

        class Meta:
            ref_name = "PermissionRequestBatchDecided"

    @extend_schema(
        operation_id="permission_requests_decide_batch",
        request=InputSerializer,
        responses={200: OutputSerializer, 503: AuditUnavailableSerializer, **ERRORS},
        description="An approver answers identical pending calls (same agent, session, cwd, tool and input) "
        "at once: each is decided on its own, with its own audit row, and one someone else decided "
        "first is reported as lost (won: false) with who decided it. Different calls: 400, nothing decided.",
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        found = [decidable_request(request, pk) for pk in data["ids"]]
        try:
            results = services.request_decide_batch(
                requests=found,
                behavior=data["behavior"],
                surface=surface_of(request),
                user=request.user,  # type: ignore[arg-type]  # IsPerson: a User
                message=data["message"],
            )
        except services.ServiceError as exc:
            raise exceptions.ValidationError({"non_field_errors": [str(exc)]}) from None
        except services.AuditUnavailable:
            return audit_unavailable()
        rows = [
            {
                "won": result.won,
                # A counted approval toward a quorum says how far it got: "1 of 2 — alice approved".
                "message": result.progress
                or result.request.outcome_sentence(result.decision, holder=result.holder, late=not result.won),
                "request": selectors.request_payload(result.request, result.decision),
            }
            for result in results
        ]
        return Response(self.OutputSerializer({"results": rows}).data)
