"""Content-Security-Policy for every page (scripts only from our own static files), the
viewer's time zone, and database connections given back as each request ends."""

from __future__ import annotations

import re
from collections.abc import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import connections
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

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
            release_connections()


def release_connections() -> None:
    """Give this thread's database connections back (to the pool, on PostgreSQL).

    Also called by a view before it waits for a decision, so a waiting request holds no
    connection. A connection inside an atomic block is left alone.
    """
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close_if_unusable_or_obsolete()


# `static/time.js` sets this cookie to the browser's IANA zone ("Europe/Paris").
TIME_ZONE_COOKIE = "gh_tz"
ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+){0,2}")


def viewer_time_zone(name: str) -> ZoneInfo | None:
    """The zone a cookie names, or None for anything that is not a known IANA zone name."""
    if not name or len(name) > 64 or not ZONE_NAME.fullmatch(name):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


class ViewerTimeZoneMiddleware:
    """Render a page's times in the viewer's zone (the cookie), not the server's UTC.

    - Pushed cards are rendered without a request, in UTC; `static/time.js` rewrites
      every `<time>` in the browser's zone, so both end up the same.
    - Day and hour buckets of the denials monitor follow the active zone too.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = viewer_time_zone(request.COOKIES.get(TIME_ZONE_COOKIE, ""))
        if zone is None:
            timezone.deactivate()
        else:
            timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
