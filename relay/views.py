"""The relay's HTTP views."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from relay import observability


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus metrics; expose it only on a network your Prometheus reaches (docs/RELAY.md)."""
    return HttpResponse(observability.metrics_text(), content_type=CONTENT_TYPE_LATEST)
