"""Dashboard pages: server-rendered, one small script per page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from approvals import selectors


@login_required
def queue(request: HttpRequest) -> HttpResponse:
    pending = selectors.pending_requests(request.user)
    return render(request, "approvals/queue.html", {"pending": pending})
