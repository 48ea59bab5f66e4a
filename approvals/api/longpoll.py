"""The door of the endpoints that can wait (`?wait=`) for a decision.

The view is sync, like every other: DRF parses, authenticates, validates and calls the
service on the request's own worker thread (each request has one while it runs), and a call
that is decided, or not asked to wait, is answered from there without crossing to the
event loop. Only a pending request asked to wait goes to the loop, through
`async_to_sync`, to wait on the channel layer (`approvals.waiting`); its thread is held
for the wait, as Django holds a request's thread while any view of its runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals import selectors
from approvals.api.errors import error_body
from approvals.api.shapes import request_output
from approvals.middleware import release_connections
from approvals.waiting import wait_for_decision


class PendingResponse(Response):
    """A 202 for a pending request; the door may wait `wait` seconds and answer 200."""

    def __init__(self, data: dict[str, Any], *, request_id: uuid.UUID, wait: float) -> None:
        super().__init__(data, status=202)
        self.request_id = request_id
        self.wait = wait


def _decided_payload(request_id: uuid.UUID) -> dict[str, Any] | None:
    request = selectors.request_get(request_id)
    if request is None:
        return None
    decision = selectors.decision_for(request)
    if decision is None:
        return None
    return request_output(selectors.request_payload(request, decision))


def api_route(
    methods: dict[str, type[APIView]], schema_view: type[APIView] | None = None
) -> Callable[..., HttpResponse]:
    """One URL, one APIView per method, behind a door that waits on a PendingResponse.

    - The style keeps one view per operation; several operations share a URL here.
    - `schema_view` is what drf-spectacular documents for the URL (default: the only view).
    """
    if schema_view is None:
        (schema_view,) = methods.values()
    views = {method.upper(): cls.as_view() for method, cls in methods.items()}

    def view(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        target = views.get(request.method or "")
        if target is None:
            allowed = ", ".join(sorted(views))
            refusal = JsonResponse(
                error_body("method_not_allowed", f"Method {request.method} is not allowed here; use {allowed}."),
                status=405,
            )
            refusal["Allow"] = allowed
            return refusal
        response = target(request, **kwargs)
        if isinstance(response, PendingResponse) and response.wait > 0:
            release_connections()
            decision = async_to_sync(wait_for_decision)(response.request_id, response.wait)
            if decision is not None:
                payload = _decided_payload(response.request_id)
                if payload is not None:
                    return JsonResponse(payload, status=200)
        return response

    # drf-spectacular finds API views through these attributes of the URL's callback.
    view.cls = schema_view  # type: ignore[attr-defined]
    view.initkwargs = {}  # type: ignore[attr-defined]
    return csrf_exempt(view)
