"""Dashboard pages: server-rendered, one small script per page.

Views parse input with `approvals.forms`, read through `approvals.selectors` and write
through `approvals.services`; they never save a model themselves.
"""

from __future__ import annotations

import io
import json
import logging
import zipfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseForbidden,
    HttpResponseRedirect,
    JsonResponse,
    QueryDict,
)
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django.views.generic import TemplateView

from agent.install import DEADLINE_MARGIN, SERVER_DEFAULTS
from approvals import charts, events, learning_views, permissions, questions, selectors, services, why
from approvals.cards import card_context, render_card
from approvals.forms import (
    SOURCE_ORDER,
    AgentForm,
    AuditFilterForm,
    BatchDecideForm,
    DecideForm,
    ExplainForm,
    RuleForm,
)
from approvals.models import AuditKind, Role, Rule, RuleSource
from approvals.pages import render_page

log = logging.getLogger(__name__)


def _person(request: HttpRequest) -> Any:
    """The logged-in person (`login_required` has run), typed for the services."""
    return request.user


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


# --- accounts ---------------------------------------------------------------------------


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    """Log out and close every dashboard socket of this person, on every device."""
    user_id = request.user.pk if request.user.is_authenticated else None
    logout(request)
    if user_id is not None:
        events.end_user_sessions(user_id)
    return redirect(settings.LOGOUT_REDIRECT_URL)


# The hook bundle: what a person's laptop needs to reach Gatehouse, and nothing else.
_BUNDLE_MODULES = ("__init__.py", "hook.py", "facts.py", "install.py")
# It runs before every tool call: only `install` loads the installer (argparse, pathlib,
# tempfile and zipfile with it); a hook run imports the hook alone.
_BUNDLE_MAIN = """import sys

if sys.argv[1:2] == ["install"]:
    from agent.install import main
else:
    from agent.hook import main

main()
"""


def hook_bundle(request: HttpRequest) -> HttpResponse:
    """``GET /agent/gatehouse-hook.pyz``: the hook as one standard-library zip application.

    No login: it is the public hook code, with no token in it; its one setting is the
    hook timeout this server's deadlines need.
    """
    import agent

    source = Path(agent.__file__).parent
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("__main__.py", _BUNDLE_MAIN)
        for name in _BUNDLE_MODULES:
            bundle.writestr(f"agent/{name}", (source / name).read_text(encoding="utf-8"))
        # The hook must outwait every deadline this server may give an ask (a
        # number, no secret): the bundle's `install` takes it as its --timeout default.
        timeout = selectors.longest_ask_deadline() + DEADLINE_MARGIN
        bundle.writestr(f"agent/{SERVER_DEFAULTS}", json.dumps({"timeout": timeout}))
    response = HttpResponse(buffer.getvalue(), content_type="application/zip")
    response["Content-Disposition"] = 'attachment; filename="gatehouse-hook.pyz"'
    return response


class NoMailPasswordReset(TemplateView):
    """Where Django's reset-by-e-mail form would be: how to get a one-time link instead (GET only)."""

    template_name = "registration/password_reset_form.html"
    http_method_names = ["get", "head"]


def manifest(request: HttpRequest) -> HttpResponse:
    """The web app manifest, so a phone can add the queue to its home screen."""
    data = {
        "name": "Gatehouse",
        "short_name": "Gatehouse",
        "description": "Approve your coding agents' tool calls.",
        "start_url": "/",
        "scope": "/",
        "display": "standalone",
        "background_color": "#f6f7f9",
        "theme_color": "#1f3a5f",
        "icons": [{"src": "/static/icon.svg", "sizes": "any", "type": "image/svg+xml", "purpose": "any"}],
    }
    return HttpResponse(json.dumps(data), content_type="application/manifest+json")


# --- the queue and requests -------------------------------------------------------------


@login_required
@require_GET
def queue(request: HttpRequest) -> HttpResponse:
    pending = selectors.pending_cards(request.user)
    cards = [render_card(req, request.user, http_request=request) for req in pending]
    recent = [
        render_card(req, request.user, decision=selectors.joined_decision(req), http_request=request)
        for req in selectors.recently_finished(request.user)
    ]
    context = {"cards": cards, "recent": recent, "recent_keep": selectors.RECENT_FINISHED, "pending_count": len(cards)}
    return render_page(request, "approvals/queue.html", context)


@login_required
@require_GET
def request_detail(request: HttpRequest, request_id: UUID) -> HttpResponse:
    req = permissions.visible_request_or_404(request.user, request_id)
    decision = selectors.decision_for(req)
    context = {
        "card": render_card(req, request.user, decision=decision, http_request=request),
        "req": req,
        "decision": decision,
        "timeline": selectors.request_timeline(req, decision),
    }
    return render_page(request, "approvals/request_detail.html", context)


@login_required
@require_POST
def request_decide(request: HttpRequest, request_id: UUID) -> HttpResponse:
    """One press of Allow / Deny on a card; 409 with the winner when someone was faster."""
    req, role = permissions.request_and_role(request.user, request_id)
    if req is None:
        raise Http404("No such request.")
    if not permissions.at_least(role, Role.APPROVER):
        return _decide_answer(request, req, 403, "You can view this team's requests but not decide them.")
    form = DecideForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{field}: {' '.join(str(e) for e in errs)}" for field, errs in form.errors.items())
        return _decide_answer(request, req, 400, f"Could not read the decision ({problems}).")
    try:
        answers = None
        if form.cleaned_data["action"] == "answer":
            answers = questions.answers_from_form(req.tool_name, req.tool_input, request.POST)
        answer = form.answer(surface="web", user=_person(request), answers=answers)
        result = services.request_decide(req.pk, answer, loaded=req)
    except services.AuditUnavailable as exc:
        return _decide_answer(request, req, 503, str(exc))
    except services.ServiceError as exc:
        return _decide_answer(request, req, 400, str(exc))
    if not result.won:
        return _decide_answer(request, result.request, 409, _lost_message(result))
    if result.decision is None and result.vote is not None:
        return _decide_answer(request, result.request, 200, f"Approved: {result.progress}.")
    verb = "Allowed" if result.decision and result.decision.behavior == "allow" else "Denied"
    return _decide_answer(request, result.request, 200, f"{verb} {req.tool_name} for {req.agent.name}.")


@login_required
@require_POST
def requests_decide_batch(request: HttpRequest) -> HttpResponse:
    """ "Allow all N" / "Deny all N" over identical pending calls: each its own decision and audit row."""
    form = BatchDecideForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{field}: {' '.join(str(e) for e in errs)}" for field, errs in form.errors.items())
        return _batch_answer(request, 400, f"Could not read the decision ({problems}).", [])
    seen = [permissions.request_and_role(request.user, pk) for pk in form.cleaned_data["ids"]]
    if any(req is None for req, _ in seen):
        raise Http404("No such request.")
    if not all(permissions.at_least(role, Role.APPROVER) for _, role in seen):
        return _batch_answer(request, 403, "You can view this team's requests but not decide them.", [])
    found = [req for req, _ in seen if req is not None]
    try:
        results = services.request_decide_batch(requests=found, surface="web", user=_person(request), **form.decision())
    except services.AuditUnavailable as exc:
        return _batch_answer(request, 503, str(exc), [])
    except services.ServiceError as exc:
        return _batch_answer(request, 400, str(exc), [])
    return _batch_answer(request, 200, _batch_message(results, form.decision()["behavior"]), results)


def _batch_message(results: list[services.DecideResult], behavior: str) -> str:
    won = [r for r in results if r.won]
    verb = "Allowed" if behavior == "allow" else "Denied"
    text = f"{verb} {len(won)} of {len(results)} identical calls."
    lost = [_lost_message(r) for r in results if not r.won]
    return f"{text} {' '.join(dict.fromkeys(lost))}" if lost else text


def _batch_answer(
    request: HttpRequest, status: int, message: str, results: list[services.DecideResult]
) -> HttpResponse:
    if _wants_json(request):
        cards = [{"id": str(r.request.pk), "html": render_card(r.request, request.user)} for r in results]
        return JsonResponse({"ok": status == 200, "message": message, "cards": cards}, status=status)
    if status == 200:
        messages.success(request, message)
        return redirect("queue")
    return render_page(request, "approvals/error.html", {"message": message}, status=status)


def _lost_message(result: services.DecideResult) -> str:
    text = result.request.outcome_sentence(result.decision, holder=result.holder, late=True)
    return f"{text[:1].upper()}{text[1:]}."


def _decide_answer(request: HttpRequest, req: Any, status: int, message: str) -> HttpResponse:
    if _wants_json(request):
        fresh = selectors.request_get(req.pk) or req
        html = render_card(fresh, request.user, http_request=request)
        return JsonResponse({"ok": status == 200, "message": message, "id": str(req.pk), "html": html}, status=status)
    if status == 200:
        messages.success(request, message)
        return redirect("queue")
    if status in (409,):
        messages.warning(request, message)
        return redirect("request-detail", request_id=req.pk)
    return render_page(request, "approvals/error.html", {"message": message}, status=status)


# --- audit ------------------------------------------------------------------------------

AUDIT_PAGE_SIZE = 50


@login_required
@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET or None)
    filters = form.filters() if form.is_bound and form.is_valid() else {}
    rows = selectors.audit_rows(filters, request.user)
    before = request.GET.get("before", "")
    if before.isdigit():
        rows = rows.filter(pk__lt=int(before))
    page = list(rows[: AUDIT_PAGE_SIZE + 1])
    query = form.query() if filters else {}
    context = {
        "form": form,
        "q": filters.get("q", ""),
        # The command, path or URL each row is about, short (the page shows it as text).
        "rows": [_audit_item(row) for row in page[:AUDIT_PAGE_SIZE]],
        "next_before": page[AUDIT_PAGE_SIZE - 1].pk if len(page) > AUDIT_PAGE_SIZE else None,
        "active_filters": {key: value for key, value in query.items() if key != "q"},
        "query": query,
        "saved_filters": selectors.saved_audit_filters(request.user),
        "query_string": urlencode(query),
        "export_csv": _export_url("csv", query),
        "export_jsonl": _export_url("jsonl", query),
    }
    return render_page(request, "approvals/audit_list.html", context)


@login_required
@require_POST
def audit_filter_save(request: HttpRequest) -> HttpResponse:
    """Save the audit page's current search and filters under a name (the person's own)."""
    form = AuditFilterForm(QueryDict(request.POST.get("query", "")))
    if not form.is_valid():
        messages.error(request, "Could not save: the filters are not valid.")
        return redirect("audit")
    query = urlencode(form.query())
    try:
        saved = services.audit_filter_save(user=_person(request), name=request.POST.get("name", "")[:80], query=query)
    except services.ServiceError as exc:
        messages.error(request, f"Could not save: {exc}")
        return redirect(reverse("audit") + ("?" + query if query else ""))
    messages.success(request, f"Saved the filter “{saved.name}”.")
    return redirect(reverse("audit") + "?" + saved.query)


@login_required
@require_POST
def audit_filter_delete(request: HttpRequest, filter_id: int) -> HttpResponse:
    if not services.audit_filter_delete(user=_person(request), filter_id=filter_id):
        raise Http404("No such saved filter.")
    messages.success(request, "Deleted the saved filter.")
    return redirect("audit")


def _audit_item(row: Any) -> dict[str, Any]:
    """One audit row and the command, path or URL it is about, short."""
    return {"row": row, "subject": why.subject(row.tool_name, row.request.tool_input)}


def _export_url(fmt: str, query: dict[str, str]) -> str:
    from urllib.parse import urlencode

    return "/api/v1/audit?" + urlencode({**query, "format": fmt})


@login_required
@require_GET
def audit_detail(request: HttpRequest, decision_id: int) -> HttpResponse:
    row = selectors.audit_row_get(decision_id, request.user)
    if row is None:
        raise Http404("No such audit row.")
    from approvals.audit import verify_row

    req = row.request
    evaluation = req.evaluation or {}
    # An autopilot promotion came after the request's decision: the card and the timeline show that decision.
    outcome = selectors.decision_for(req) if row.kind == AuditKind.AUTOPILOT else row
    context = {
        "row": row,
        "req": req,
        "card": card_context(req, request.user, decision=outcome),
        "trace": evaluation.get("trace") or [],
        "engine": evaluation,
        "row_ok": verify_row(row),
        "link_ok": selectors.audit_neighbour_hash_ok(row),
        "reason_json": json.dumps(row.reason, indent=2, sort_keys=True, default=str),
        "updated_input_json": json.dumps(row.updated_input, indent=2, sort_keys=True) if row.updated_input else "",
        "wait_s": (row.created_at - req.created_at).total_seconds(),
        "timeline": selectors.request_timeline(req, outcome),
    }
    return render_page(request, "approvals/audit_detail.html", context)


# --- denials monitor --------------------------------------------------------------------

WINDOWS = {"1": "24 hours", "7": "7 days", "30": "30 days"}


@login_required
@require_GET
def denials(request: HttpRequest) -> HttpResponse:
    days = request.GET.get("days", "7")
    if days not in WINDOWS:
        days = "7"
    # In the viewer's zone (days and hours are theirs), on a whole minute, so the links to
    # the audit log carry no seconds or microseconds; the period ends at the next minute.
    now = timezone.localtime().replace(second=0, microsecond=0) + timedelta(minutes=1)
    since = now - timedelta(days=int(days))
    hourly = days == "1"
    user = request.user
    over_time = selectors.denials_over_time(user, since, hourly=hourly)
    by = selectors.denials_top(user, since)
    audit = _audit_link(since, now)

    def by_chart(title: str, dimension: str, key: str) -> tuple[str, Any]:
        chart = charts.bar_chart(by[dimension], title=f"Denials {title.lower()}", link=lambda v: audit(**{key: v}))
        return title, chart

    context = {
        "days": days,
        "windows": WINDOWS,
        "window_label": WINDOWS[days],
        "total": sum(n for _, _, n in over_time),
        **_denial_rates(user, since, now, audit),
        "time_chart": charts.time_chart(
            over_time,
            causes=selectors.CAUSE_ORDER,
            since=since,
            until=now,
            hourly=hourly,
            title="Denials over time, by cause",
            link=lambda start, end, cause: _audit_link(start, end)(**CAUSE_FILTERS[cause]),
        ),
        "legend": [{"cause": cause, "slug": charts.slug(cause)} for cause in selectors.CAUSE_ORDER],
        "charts": [
            by_chart("By tool", "tool", "tool"),
            by_chart("By agent", "agent", "agent"),
            by_chart("By rule", "rule", "rule"),
            by_chart("By decider", "decider", "decided_by"),
        ],
        "humans": selectors.human_decision_stats(user, since),
        "approvers": [
            {"stats": stats, "href": audit(behavior="", decided_by=stats.user, reason_type="user")}
            for stats in selectors.approver_stats(user, since, now)
        ],
        "rubber_stamp_s": int(selectors.RUBBER_STAMP_MS / 1000),
        "loops": selectors.sessions_in_denial_loops(user, since),
        "denial_limit": settings.GATEHOUSE_DENIAL_LIMIT,
    }
    return render_page(request, "approvals/denials.html", context)


# Which audit filters show the denials of each cause.
CAUSE_FILTERS = {
    "rule": {"reason_type": "rule"},
    "person": {"reason_type": "user"},
    "timeout": {"reason_type": "timeout"},
    "safety check": {"reason_type": "safetyCheck"},
    "other": {},
}


def _audit_link(since: datetime, until: datetime) -> Callable[..., str]:
    """`audit(**filters)`: the audit page's URL for the denials of this period, narrowed by `filters`."""

    def audit(**filters: str) -> str:
        query = {"behavior": "deny", "since": since.isoformat(), "until": until.isoformat(), **filters}
        return reverse("audit") + "?" + urlencode(query)

    return audit


def _denial_rates(user: Any, since: datetime, until: datetime, audit: Callable[..., str]) -> dict[str, Any]:
    """This period's denial rate and causes, beside the previous period of the same length."""
    now = selectors.decision_period(user, since, until)
    before = selectors.decision_period(user, since - (until - since), since)
    change = None
    if now["rate"] is not None and before["rate"] is not None:
        change = round((now["rate"] - before["rate"]) * 100, 1)
    causes = [
        {"cause": cause, "n": n, "was": before["causes"][cause], "href": audit(**CAUSE_FILTERS[cause])}
        for cause, n in now["causes"].items()
    ]
    return {"period": now, "previous": before, "rate_change": change, "causes": causes, "denied_href": audit()}


# --- rules ------------------------------------------------------------------------------


def _rule_form(request: HttpRequest, data: Any = None, **kwargs: Any) -> RuleForm:
    teams = selectors.teams_deciding(request.user)
    agents = selectors.agents_visible_to(request.user).filter(team__in=teams, revoked_at__isnull=True)
    return RuleForm(data, teams=teams, agents=agents, **kwargs)


def _explain_form(request: HttpRequest, data: Any = None) -> ExplainForm:
    agents = selectors.agents_visible_to(request.user).filter(revoked_at__isnull=True)
    return ExplainForm(data, agents=agents)


@login_required
def rules(request: HttpRequest) -> HttpResponse:
    """All rules by source in precedence order; POST adds one (approvers only)."""
    form = _rule_form(request)
    if request.method == "POST":
        form = _rule_form(request, request.POST)
        if not permissions.is_approver_anywhere(request.user):
            return HttpResponseForbidden("Only approvers can add rules.")
        if form.is_valid():
            try:
                services.rule_create(created_by=_person(request), **_rule_fields(form))
            except services.ServiceError as exc:
                form.add_error("rule", str(exc))
            else:
                messages.success(request, f"Saved rule {form.cleaned_data['rule']}.")
                return redirect("rules")
    return _rulesrender_page(request, form, _explain_form(request), None, status=400 if form.errors else 200)


def _rule_fields(form: RuleForm) -> dict[str, Any]:
    data = form.cleaned_data
    return {
        "rule": data["rule"].strip(),
        "behavior": data["behavior"],
        "source": data["source"],
        "team": data["team"],
        "scope": data["scope"],
        "agent": data.get("agent"),
        "project_path": data.get("project_path") or "",
        "session_id": data.get("session_id") or "",
        "expires_at": data.get("expires_at"),
        "ask_timeout": data.get("ask_timeout"),
        "approvals_required": data.get("approvals_required") or 1,
        "approver_group": data.get("approver_group") or "",
        "note": data.get("note") or "",
    }


def _rulesrender_page(
    request: HttpRequest, form: RuleForm, explain_form: ExplainForm, explained: Any, *, status: int = 200
) -> HttpResponse:
    all_rules = list(selectors.rules_visible_to(request.user))
    groups = []
    for source in SOURCE_ORDER:
        members = [r for r in all_rules if r.source == source]
        if members:
            rows = [{"rule": r, "editable": _rule_editable(request, r)} for r in members]
            groups.append({"source": source.value, "rows": rows, "read_only": source == RuleSource.POLICY_SETTINGS})
    context = {
        "groups": groups,
        "form": form,
        "explain_form": explain_form,
        "explained": explained,
        "lint": selectors.rules_lint(all_rules),
        "can_add": permissions.is_approver_anywhere(request.user),
        "now": timezone.now(),
    }
    context.update(learning_views.rules_page_learning(request))
    return render_page(request, "approvals/rules.html", context, status=status)


def _rule_editable(request: HttpRequest, rule: Rule) -> bool:
    return rule.source != RuleSource.POLICY_SETTINGS and permissions.can_manage_team(request.user, rule.team_id)


def _managed_rule(request: HttpRequest, rule_id: int) -> Rule:
    rule = selectors.rules_visible_to(request.user).filter(pk=rule_id).first()
    if rule is None:
        raise Http404("No such rule.")
    return rule


@login_required
def rule_edit(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = _managed_rule(request, rule_id)
    if not _rule_editable(request, rule):
        return HttpResponseForbidden("This rule is read-only for you (policySettings, or you are not an approver).")
    initial = {f: getattr(rule, f) for f in ("rule", "behavior", "source", "team", "scope", "agent")}
    initial.update(
        project_path=rule.project_path,
        session_id=rule.session_id,
        expires_at=rule.expires_at,
        ask_timeout=rule.ask_timeout,
        approvals_required=rule.approvals_required,
        approver_group=rule.approver_group,
        note=rule.note,
    )
    form = _rule_form(request, request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        changes = _rule_fields(form)
        if changes.pop("team") != rule.team:
            form.add_error("team", "A rule cannot move to another team; delete it and add it there.")
        try:
            if not form.errors:
                # `rule_update(rule=...)` takes the instance under that name, so the new text
                # is set first; rule_update validates it before saving.
                rule.rule = changes.pop("rule")
                services.rule_update(rule=rule, **changes)
        except services.ServiceError as exc:
            form.add_error("rule", str(exc))
        else:
            if not form.errors:
                messages.success(request, f"Updated rule {rule.rule}.")
                return redirect("rules")
    status = 400 if form.is_bound and form.errors else 200
    return render_page(request, "approvals/rule_edit.html", {"form": form, "rule": rule}, status=status)


@login_required
@require_POST
def rule_delete(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = _managed_rule(request, rule_id)
    if not _rule_editable(request, rule):
        return HttpResponseForbidden("This rule is read-only for you (policySettings, or you are not an approver).")
    text = rule.rule
    services.rule_delete(rule=rule)
    messages.success(request, f"Deleted rule {text}.")
    return redirect("rules")


@login_required
def rules_explain(request: HttpRequest) -> HttpResponse:
    """Dry-run one call through the engine with the team's rules (anyone who can see rules)."""
    form = _explain_form(request, request.POST if request.method == "POST" else request.GET or None)
    explained = None
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        agent = data.get("agent")
        team = agent.team if agent is not None else selectors.teams_for(request.user).order_by("pk").first()
        if team is None:
            form.add_error(None, "You belong to no team, so there are no rules to explain against.")
        else:
            call = {k: data.get(k) for k in ("tool_name", "tool_input", "cwd", "session_id")}
            call["permission_mode"] = data.get("mode")
            explained = selectors.rules_explain(team=team, agent=agent, call=call)
            explained["reason_json"] = json.dumps(explained.get("reason"), indent=2, sort_keys=True)
    status = 400 if form.is_bound and form.errors else 200
    return _rulesrender_page(request, _rule_form(request), form, explained, status=status)


# --- agents -----------------------------------------------------------------------------


def _hook_snippet(request: HttpRequest) -> str:
    """What `install_claude_hooks` writes, for this server's URL: it runs from any directory."""
    from approvals.management.commands import install_claude_hooks as installer

    server = settings.PUBLIC_URL if settings.PUBLIC_URL_SET else request.build_absolute_uri("/").rstrip("/")
    timeout = selectors.longest_ask_deadline() + DEADLINE_MARGIN  # what the installer defaults to
    options = {"server": server, "transport": "command", "python": "", "timeout": timeout, "on_timeout": "deny"}
    options |= {"on_unreachable": "ask", "ask_locally": False, "token_file": "~/.config/gatehouse-token"}
    command = installer.hook_command(options)
    doc = installer.with_ours({}, list(installer.GATES["pre-tool-use"]), command, timeout + installer.TIMEOUT_MARGIN)
    return json.dumps(doc, indent=2)


@login_required
def agents(request: HttpRequest) -> HttpResponse:
    """Agents of the person's teams; POST registers one and shows its token exactly once."""
    teams = selectors.teams_deciding(request.user)
    form = AgentForm(teams=teams)
    created = None
    if request.method == "POST":
        if not permissions.is_approver_anywhere(request.user):
            return HttpResponseForbidden("Only approvers can register agents.")
        form = AgentForm(request.POST, teams=teams)
        if form.is_valid():
            try:
                agent, token = services.agent_create(
                    name=form.cleaned_data["name"].strip(),
                    team=form.cleaned_data["team"],
                    owner=_person(request),
                    mode=form.cleaned_data["mode"],
                )
            except services.ServiceError as exc:
                form.add_error("name", str(exc))
            else:
                # Rendered into this response only: never stored, never shown again.
                created = {"agent": agent, "token": token}
                form = AgentForm(teams=teams)
    pauses = list(selectors.pauses_visible_to(request.user))
    rows = [
        {
            "agent": a,
            "can_manage": a.revoked_at is None and permissions.can_manage_team(request.user, a.team_id),
            "can_pause": a.revoked_at is None and permissions.is_team_admin(request.user, a.team_id),
            "paused": next(
                (p for p in pauses if p.agent_id == a.pk or (p.agent_id is None and p.team_id == a.team_id)), None
            ),
        }
        for a in selectors.agents_visible_to(request.user)
    ]
    context = {
        "rows": rows,
        "form": form,
        "created": created,
        "can_add": permissions.is_approver_anywhere(request.user),
        "snippet": _hook_snippet(request),
        "pauses": [{"pause": p, "can_resume": permissions.is_team_admin(request.user, p.team_id)} for p in pauses],
        "pausable_teams": selectors.teams_administered(request.user),
    }
    response = render_page(request, "approvals/agents.html", context, status=400 if form.errors else 200)
    if created:
        response.headers["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def agent_revoke(request: HttpRequest, agent_id: int) -> HttpResponse:
    agent = selectors.agents_visible_to(request.user).filter(pk=agent_id).first()
    if agent is None:
        raise Http404("No such agent.")
    if not permissions.can_manage_team(request.user, agent.team_id):
        return HttpResponseForbidden("Only approvers of this agent's team can revoke it.")
    services.agent_revoke(agent=agent)
    messages.success(request, f"Revoked {agent.name}: its token no longer works.")
    return redirect("agents")


@login_required
@require_POST
def agents_pause(request: HttpRequest) -> HttpResponse:
    """The stop switch: a team admin pauses one agent (`agent` id) or the whole team (`team` id)."""
    team = selectors.teams_administered(request.user).filter(pk=request.POST.get("team") or 0).first()
    if team is None:
        return HttpResponseForbidden("Only a team admin can pause its agents.")
    agent = None
    if request.POST.get("agent"):
        agent = selectors.agents_visible_to(request.user).filter(pk=request.POST["agent"], team=team).first()
        if agent is None:
            raise Http404("No such agent.")
    try:
        services.pause_set(
            team=team,
            agent=agent,
            answer=request.POST.get("answer", "deny"),
            user=_person(request),
            surface="web",
            note=request.POST.get("note", "").strip(),
        )
    except services.ServiceError as exc:
        messages.error(request, f"Could not pause: {exc}")
    else:
        messages.success(request, f"Paused {agent.name if agent else 'team ' + team.name}: its calls are stopped now.")
    return redirect("agents")


@login_required
@require_POST
def pause_resume(request: HttpRequest, pause_id: int) -> HttpResponse:
    pause = selectors.pauses_visible_to(request.user).filter(pk=pause_id).first()
    if pause is None:
        raise Http404("No such pause.")
    if not permissions.is_team_admin(request.user, pause.team_id):
        return HttpResponseForbidden("Only a team admin can resume its agents.")
    try:
        services.pause_lift(pause=pause, user=_person(request), surface="web")
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Resumed {pause.agent.name if pause.agent else 'team ' + pause.team.name}.")
    return redirect("agents")


@login_required
@require_POST
def agent_pin(request: HttpRequest, agent_id: int) -> HttpResponse:
    """Pin an agent's project roots (one per line) and home; empty fields unpin."""
    agent = selectors.agents_visible_to(request.user).filter(pk=agent_id).first()
    if agent is None:
        raise Http404("No such agent.")
    if not permissions.can_manage_team(request.user, agent.team_id):
        return HttpResponseForbidden("Only managers of this agent's team can pin its roots and home.")
    roots = [line.strip() for line in request.POST.get("roots", "").splitlines() if line.strip()]
    try:
        services.agent_pin(agent=agent, roots=roots, home=request.POST.get("home", "").strip())
    except services.ServiceError as exc:
        messages.error(request, f"Could not pin {agent.name}: {exc}")
    else:
        messages.success(request, f"Pinned {agent.name}'s project roots and home.")
    return redirect("agents")


# --- profile ----------------------------------------------------------------------------


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    """Link chat accounts (by a one-time code sent to the bot), and create a personal API token."""
    token = link_code = None
    if request.method == "POST" and request.POST.get("action") == "token":
        days = request.POST.get("expires_in_days", "0")
        lifetime = int(days) if days.isdigit() and int(days) in services.TOKEN_LIFETIMES_DAYS else 0
        token = services.personal_token_create(user=_person(request), expires_in_days=lifetime)
    elif request.method == "POST" and request.POST.get("action") == "revoke-token":
        token_id = request.POST.get("token_id", "")
        revoked = token_id.isdigit() and services.personal_token_revoke_own(
            user=_person(request), token_id=int(token_id)
        )
        if revoked:
            messages.success(request, "Revoked: that token no longer works.")
        return redirect("profile")
    elif request.method == "POST" and request.POST.get("action") == "link-code":
        link_code = services.chat_link_code_create(user=_person(request))
    context = {
        "link_code": link_code,
        "link_minutes": int(services.LINK_CODE_LIFETIME.total_seconds() // 60),
        "identities": selectors.chat_identities_for(request.user),
        "teams": selectors.teams_for(request.user),
        "memberships": request.user.memberships.select_related("team"),  # type: ignore[union-attr]
        "token": token,
        "api_tokens": selectors.personal_tokens_of(request.user),
        "token_lifetimes": [d for d in services.TOKEN_LIFETIMES_DAYS if d],
        "now": timezone.now(),
    }
    response = render_page(request, "approvals/profile.html", context)
    if token or link_code:
        response.headers["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def chat_identity_delete(request: HttpRequest, identity_id: int) -> HttpResponse:
    if not services.chat_identity_unlink(user=request.user, identity_id=identity_id):
        raise Http404("No such linked account.")
    messages.success(request, "Unlinked.")
    return HttpResponseRedirect(reverse("profile"))
