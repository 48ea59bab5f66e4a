"""One error shape for the whole API: `{"error": {"code", "message", "fields"?}}`."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def _first_message(detail: Any) -> str:
    if isinstance(detail, dict):
        for key, value in detail.items():
            inner = _first_message(value)
            return inner if key == "non_field_errors" else f"{key}: {inner}"
        return "invalid input"
    if isinstance(detail, list):
        return _first_message(detail[0]) if detail else "invalid input"
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    code = getattr(exc, "default_code", "error")
    body: dict[str, Any] = {"code": code, "message": _first_message(response.data)}
    if isinstance(exc, exceptions.ValidationError) and isinstance(response.data, dict):
        body["fields"] = response.data
    if isinstance(exc, exceptions.ParseError):
        body["message"] = f"The body is not valid JSON: {exc.detail}"
    if response.status_code == status.HTTP_401_UNAUTHORIZED and not body["message"]:
        body["message"] = "Authentication required."
    response.data = {"error": body}
    return response
