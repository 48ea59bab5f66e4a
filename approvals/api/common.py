"""What every API view shares: who is calling, strict input, the `wait` parameter."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import permissions, serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.serializer_helpers import BindingDict
from rest_framework.views import APIView

from approvals.api.errors import PayloadTooLarge
from approvals.api.parsers import LimitedJSONParser
from approvals.auth import AgentPrincipal


class IsAgent(permissions.BasePermission):
    message = "Only agents can do this: authenticate with an agent token (manage.py createagent NAME)."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.user, AgentPrincipal)


class IsPerson(permissions.BasePermission):
    message = "Only people can do this: log in, or use a personal token (manage.py createtoken USER)."

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        return bool(user.is_authenticated) and not isinstance(user, AgentPrincipal)


class StrictSerializer(serializers.Serializer):
    """Refuses unknown fields and numbers where text belongs: a mistake is an error, not a guess."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {key: [f"unknown field; allowed fields are {', '.join(sorted(self.fields))}"] for key in unknown}
                )
            not_text = {
                key: ["must be a string"]
                for key, field in self.fields.items()
                if isinstance(field, serializers.CharField)
                and data.get(key) is not None
                and not isinstance(data[key], str)
                and not isinstance(self, QuerySerializer)
            }
            if not_text:
                raise serializers.ValidationError(not_text)
        return super().to_internal_value(data)


class FieldsBoundOnce(serializers.Serializer):
    """A serializer whose fields are built and bound once per class instead of per instance.

    DRF deep-copies every declared field for each serializer it makes (`Serializer.fields`):
    for the call's spec, made for every call an agent sends, that copy was an eighth of a
    submit's CPU. Fields keep nothing of a validation (each value passes through them, the
    errors are raised), so one set serves every instance and thread. They are bound to a
    serializer of their own without data, so they hold no call. Only for serializers that
    never read `context`, `partial` or `instance` through a field.
    """

    @property
    def fields(self) -> BindingDict:
        cls = type(self)
        shared: BindingDict | None = cls.__dict__.get("_fields_bound_once")
        if shared is None:
            owner = cls()
            shared = BindingDict(owner)
            for name, field in owner.get_fields().items():
                shared[name] = field
            cls._fields_bound_once = shared  # type: ignore[attr-defined]
        return shared


class QuerySerializer(StrictSerializer):
    """Query-string filters: every value arrives as text, so only unknown keys are refused."""


NO_WAIT = 0.0


class WaitQuerySerializer(serializers.Serializer):
    wait = serializers.FloatField(
        required=False,
        default=NO_WAIT,
        min_value=0,
        help_text="Seconds to wait for a decision (capped by the server).",
    )

    class Meta:
        ref_name = "WaitQuery"


def wait_seconds(request: Request) -> float:
    """The `?wait=` parameter, validated and capped at GATEHOUSE_MAX_WAIT.

    - Without one, the default at once: a serializer deep-copies its fields for each
      request, about 1.7% of a server's interpreter time under figure 2's submits, to
      hand back that default.
    """
    if "wait" not in request.query_params:
        return NO_WAIT
    query = WaitQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return float(min(query.validated_data["wait"], settings.GATEHOUSE_MAX_WAIT))


def surface_of(request: Request) -> str:
    """`web` for a browser's session POST, `api` for a token."""
    return "web" if isinstance(request.successful_authenticator, SessionAuthentication) else "api"


def without_nul(value: Any, where: str = "tool_input") -> None:
    """Reject NUL characters: PostgreSQL cannot store them in JSON or text columns."""
    if isinstance(value, str):
        if "\x00" in value:
            raise serializers.ValidationError(f"{where} contains a NUL character, which cannot be stored")
    elif isinstance(value, dict):
        for key, item in value.items():
            without_nul(key, where)
            without_nul(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            without_nul(item, f"{where}[{index}]")


class JsonNegotiation(DefaultContentNegotiation):
    """Always JSON: `?format=` is the audit export's parameter, not DRF's renderer switch."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type


class ApiView(APIView):
    """An APIView with the API's size-limited JSON parser and JSON-only responses."""

    parser_classes = [LimitedJSONParser]
    content_negotiation_class = JsonNegotiation

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        raw = request._request
        if raw.method in ("POST", "PUT", "PATCH") and not raw.META.get("CONTENT_LENGTH"):
            # A chunked body has no Content-Length, and DRF would read it as empty. Django
            # checks the buffered size against the limit here (a 413 when too big).
            body = raw.body
            if body:
                raw.META["CONTENT_LENGTH"] = str(len(body))
        super().initial(request, *args, **kwargs)

    def handle_exception(self, exc: Exception) -> Response:
        # DRF reads JSON bodies through `request.body`, where Django enforces
        # DATA_UPLOAD_MAX_MEMORY_SIZE with a SuspiciousOperation; say what it is: a 413.
        if isinstance(exc, RequestDataTooBig):
            exc = PayloadTooLarge(f"The body is larger than the {settings.GATEHOUSE_MAX_BODY_BYTES // 1024} KiB limit.")
        return super().handle_exception(exc)
