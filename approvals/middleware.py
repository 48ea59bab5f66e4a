"""Content-Security-Policy for every page: scripts only from our own static files."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connections
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


class ReleaseConnectionsMiddleware:
    """Give the request's database connections back as the request leaves the thread.

    Django closes them on `request_finished`, but under ASGI that signal is sent from
    another context than the request task that opened them, so it finds none. Without a
    pool the connection lingered until garbage collection; with the pool (the default on
    PostgreSQL) it stayed checked out, and 20 requests drained it
    (`test_exactly_one_decision`). Outermost, so it runs after every other middleware
    has used the database. A connection inside an atomic block (the test client's
    transaction) is left alone.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            return self.get_response(request)
        finally:
            for conn in connections.all(initialized_only=True):
                if not conn.in_atomic_block:
                    conn.close_if_unusable_or_obsolete()
