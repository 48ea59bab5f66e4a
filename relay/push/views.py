"""The service worker and the notifications page (turn Web Push and ntfy on or off)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from approvals.pages import render_page
from relay.push import ntfy, selectors, services


@require_GET
def service_worker(request: HttpRequest) -> HttpResponse:
    """`/service-worker.js`: from the site's root, so its scope is the whole dashboard."""
    source = (settings.BASE_DIR / "static" / "service-worker.js").read_text(encoding="utf-8")
    response = HttpResponse(source, content_type="text/javascript; charset=utf-8")
    response["Service-Worker-Allowed"] = "/"
    response["Cache-Control"] = "no-cache"  # browsers re-check it; a new version takes over
    return response


@login_required
def notifications(request: HttpRequest) -> HttpResponse:
    """This browser's Web Push switch, the person's subscribed devices, and their ntfy topic."""
    user: Any = request.user
    if request.method == "POST":
        action = request.POST.get("action", "")
        if action == "remove" and request.POST.get("subscription_id", "").isdigit():
            services.subscription_delete(user=user, subscription_id=int(request.POST["subscription_id"]))
            messages.success(request, "Removed: that device gets no more notifications.")
        elif action == "ntfy-on" and settings.GATEHOUSE_NTFY_URL:
            services.ntfy_topic_enable(user=user)
            messages.success(request, "ntfy is on: subscribe to your topic in the ntfy app.")
        elif action == "ntfy-off":
            services.ntfy_topic_disable(user=user)
            messages.success(request, "ntfy is off.")
        return redirect("notifications")
    topic = selectors.ntfy_topic_of(user)
    context = {
        "subscriptions": selectors.subscriptions_of(user),
        "ntfy_enabled": bool(settings.GATEHOUSE_NTFY_URL),
        "ntfy_topic": topic,
        "ntfy_url": ntfy.subscribe_url(topic) if topic and settings.GATEHOUSE_NTFY_URL else "",
    }
    return render_page(request, "relay/notifications.html", context)
