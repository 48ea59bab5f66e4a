"""Top-level routes: the API, the Claude Code hook endpoint, chat integrations, pages."""

from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from approvals.api.claude_code import claude_code_hook
from approvals.api.errors import not_found as api_not_found
from approvals.ratelimit import login_view
from approvals.views import NoMailPasswordReset, logout_view

urlpatterns = [
    # The admin's own login form would be an unthrottled way to guess passwords.
    path("admin/login/", login_view),
    path("admin/", admin.site.urls),
    # Before Django's own: logging out also closes the person's dashboard sockets.
    path("accounts/logout/", logout_view, name="logout"),
    # Before Django's own: Gatehouse sends no mail (a reset by e-mail reached for an SMTP
    # server that is not there); the pages say how to get a one-time link instead.
    path("accounts/password_reset/", NoMailPasswordReset.as_view(), name="password_reset"),
    path("accounts/password_reset/done/", NoMailPasswordReset.as_view(), name="password_reset_done"),
    # Before Django's own: failed logins are counted and throttled (approvals/ratelimit.py).
    path("accounts/login/", login_view, name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include("approvals.api.urls")),
    path("api/v1/", include("relay.bridges.api_urls")),
    path("api/v1/", include("relay.push.urls")),
    # Unknown API paths get the API's JSON 404, even with DEBUG on.
    re_path(r"^api/", api_not_found),
    path("hooks/claude-code", claude_code_hook, name="claude-code-hook"),
    path("", include("relay.urls")),
    path("", include("approvals.urls")),
]

handler404 = "approvals.api.errors.not_found"
handler500 = "approvals.api.errors.server_error"
