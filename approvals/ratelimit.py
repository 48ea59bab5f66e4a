"""Login throttling: a fixed-window failure counter per client address and username.

Passwords are the one secret a person types, so guessing them must be slow. Two
counters guard the login form: one per (address, username), so an attacker cannot try
many passwords for one person, and a wider one per address, so they cannot spray one
password over many usernames. Counters live in the `ratelimit` cache (Redis when
`REDIS_URL` is set, so every server process shares them).

The address is `REMOTE_ADDR`: behind a reverse proxy every client shares the proxy's
address, which makes the per-address limit stricter, never looser. `X-Forwarded-For`
is not trusted because any client can send it.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse

log = logging.getLogger(__name__)

CACHE_ALIAS = "ratelimit"


def _key(*parts: str) -> str:
    # Hashed: usernames are attacker-chosen text and must not shape cache keys.
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()
    return f"login-fail:{digest}"


def _keys(address: str, username: str) -> list[tuple[str, int]]:
    return [
        (_key("user", address, username.strip().lower()), settings.GATEHOUSE_LOGIN_MAX_FAILURES),
        (_key("addr", address), settings.GATEHOUSE_LOGIN_MAX_FAILURES_PER_ADDRESS),
    ]


def client_address(request: HttpRequest) -> str:
    return str(request.META.get("REMOTE_ADDR") or "unknown")


def login_blocked(address: str, username: str) -> bool:
    """True when this address (for this username) has failed too often in the window."""
    try:
        cache = caches[CACHE_ALIAS]
        counts = cache.get_many([key for key, _ in _keys(address, username)])
    except Exception as exc:
        # The password check still runs; refusing every login while the cache is down
        # would lock every person out, which is worse than a short unthrottled window.
        log.error("login rate limit unavailable, not throttling: %s", exc)
        return False
    return any(int(counts.get(key) or 0) >= limit for key, limit in _keys(address, username))


def login_failed(address: str, username: str) -> None:
    """Count one failed login for this address and username."""
    window = settings.GATEHOUSE_LOGIN_WINDOW
    try:
        cache = caches[CACHE_ALIAS]
        for key, _ in _keys(address, username):
            # add() starts the window only once; incr() never extends it.
            cache.add(key, 0, timeout=window)
            try:
                cache.incr(key)
            except ValueError:
                cache.set(key, 1, timeout=window)
    except Exception as exc:
        log.error("login rate limit unavailable, failure not counted: %s", exc)


def login_succeeded(address: str, username: str) -> None:
    """Forget this person's failures from this address (the per-address count stays)."""
    try:
        caches[CACHE_ALIAS].delete(_keys(address, username)[0][0])
    except Exception as exc:
        log.error("login rate limit unavailable: %s", exc)


class ThrottledLoginView(LoginView):
    """Django's login view, answering 429 once an address has failed too often."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        address = client_address(request)
        username = str(request.POST.get("username", ""))
        if login_blocked(address, username):
            log.warning("login throttled for %s", address)
            # An unbound form: binding it would check the password, which is what we refuse.
            minutes = max(settings.GATEHOUSE_LOGIN_WINDOW // 60, 1)
            message = f"Too many failed logins. Wait {minutes} minutes and try again."
            form = AuthenticationForm(request=request)
            response = self.render_to_response(self.get_context_data(form=form, throttled=message))
            response.status_code = 429
            return response
        response = super().post(request, *args, **kwargs)
        if request.user.is_authenticated:
            login_succeeded(address, username)
        else:
            login_failed(address, username)
        return response


login_view = ThrottledLoginView.as_view()
