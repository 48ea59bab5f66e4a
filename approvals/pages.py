"""What every dashboard page shows around its content, put in one place so no page drifts.

The nav's pending count and the person's standing (the "viewer" tag, the team admin's
links) come from here for every page; a page rendered without them showed every
superuser and approver as a "viewer".
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from approvals import permissions, selectors


def render_page(request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200) -> HttpResponse:
    """Render a page with what every page shows: the pending count in the title and nav."""
    context.setdefault("pending_count", selectors.pending_requests(request.user).count())
    context.setdefault("is_approver", permissions.is_approver_anywhere(request.user))
    context.setdefault("is_team_admin", permissions.is_admin_anywhere(request.user))
    return render(request, template, context, status=status)
