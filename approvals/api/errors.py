"""One error shape for the whole API: `{"error": {"code", "message", "fields"?}}`."""

from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

log = logging.getLogger(__name__)


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The body is larger than the 1 MiB limit."
    default_code = "payload_too_large"


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request was already decided."
    default_code = "already_decided"


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


def _first_message(detail: Any) -> str:
    if isinstance(detail, dict):
        for key, value in detail.items():
            inner = _first_message(value)
            return inner if key in ("non_field_errors", "detail") else f"{key}: {inner}"
        return "invalid input"
    if isinstance(detail, list):
        return _first_message(detail[0]) if detail else "invalid input"
    return str(detail)


DATABASE_UNAVAILABLE = "audit unavailable: Gatehouse cannot reach its database, so it denies the call."


def database_unavailable() -> Response:
    """Fail closed with the same deny body as an unwritable audit row (503, never a 500)."""
    return Response(
        {
            "decision": {
                "behavior": "deny",
                "reason": {"type": "other", "detail": "audit unavailable"},
                "message": DATABASE_UNAVAILABLE,
            },
            **error_body("audit_unavailable", DATABASE_UNAVAILABLE),
        },
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DatabaseError):
        # The database is down or unreachable (even token lookup failed): a clear deny.
        log.error("database unavailable: %s", exc)
        return database_unavailable()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    code = getattr(exc, "default_code", "error")
    if isinstance(exc, exceptions.APIException) and isinstance(exc.detail, exceptions.ErrorDetail):
        code = exc.detail.code or code
    body: dict[str, Any] = {"code": code, "message": _first_message(response.data)}
    if isinstance(exc, exceptions.ValidationError) and isinstance(response.data, dict):
        body["fields"] = response.data
    if isinstance(exc, exceptions.ParseError):
        body["message"] = f"The body is not valid JSON: {exc.detail}"
    if response.status_code == status.HTTP_401_UNAUTHORIZED and not body["message"]:
        body["message"] = "Authentication required."
    response.data = {"error": body}
    return response


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """`handler404`: JSON under /api/ (clients parse it), the HTML page elsewhere."""
    if _is_api(request):
        return JsonResponse(error_body("not_found", f"No API endpoint at {request.path}; see /api/docs/."), status=404)
    return defaults.page_not_found(request, exception or Exception("not found"))


def server_error(request: HttpRequest) -> HttpResponse:
    """`handler500`: JSON under /api/, the HTML page elsewhere."""
    if _is_api(request):
        return JsonResponse(
            error_body("server_error", "Gatehouse failed on this request; the error is in the server log."),
            status=500,
        )
    return defaults.server_error(request)
