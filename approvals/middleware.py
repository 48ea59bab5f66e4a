"""Content-Security-Policy for every page: scripts only from our own static files."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'self'; form-action 'self'"
)

API_DOCS_POLICY = POLICY.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # Swagger UI (served from our static files) styles one element inline; scripts
        # stay 'self'-only there as everywhere.
        policy = API_DOCS_POLICY if request.path.startswith("/api/docs") else POLICY
        response.headers.setdefault("Content-Security-Policy", policy)
        return response
