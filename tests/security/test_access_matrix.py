"""Who may reach what: every HTTP route and WebSocket route by every kind of caller, as tables.

The HTTP table is checked against the URL resolver, so a new route that nobody put in
the table fails this test instead of shipping unreviewed. People use their browser
session here (the API's own matrix, tests/approvals/test_api_role_matrix.py, covers
personal tokens); agents and bad tokens send `Authorization: Bearer`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from approvals import services
from approvals.models import ChatIdentity, Decision, Pause, Rule
from relay.models import PushSubscription
from tests.conftest import AgentPersona

PERSONAS = [
    "anonymous",
    "wrong_token",
    "revoked_token",
    "agent",
    "other_agent",
    "viewer",
    "approver",
    "team_admin",
    "outsider",
    "admin",
]

# A browser's PushSubscription: a real P-256 public key and a 16-byte auth secret.
P256DH = "BFaqGdPf1MyuJo2KDY0Pykq7hlmXkyzDRNSuNBv9mL3VTLv82YlHTEV1PxkMZQuZSCqTzaka7QB9mdTavqy1jLk"
PUSH_SUBSCRIPTION = {"keys": {"p256dh": P256DH, "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}
# The fake push service's URL (set by `push_service`): asks made here are pushed to it,
# which answers 404 for these made-up subscriptions, never to a real push service.
PUSH_SERVICE: list[str] = [""]

ASK = {"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "session_id": "s1", "cwd": "/tmp/proj"}

# route (as the resolver spells it), method, path with {req} {rule} {decision} {agent}
# {identity} placeholders, body. `login` redirect is 302; pages refuse people outside
# the team with 404 (existence is not revealed), viewers with 403.
CELLS: dict[str, tuple[str, str, str, Any]] = {
    # name: (route, method, path, body)
    "login_page": ("accounts/login/", "get", "/accounts/login/", None),
    "logout": ("accounts/logout/", "post", "/accounts/logout/", {}),
    "password_change": ("accounts/password_change/", "get", "/accounts/password_change/", None),
    "password_change_done": ("accounts/password_change/done/", "get", "/accounts/password_change/done/", None),
    "password_reset": ("accounts/password_reset/", "get", "/accounts/password_reset/", None),
    "password_reset_done": ("accounts/password_reset/done/", "get", "/accounts/password_reset/done/", None),
    "password_reset_confirm": ("accounts/reset/<uidb64>/<token>/", "get", "/accounts/reset/MQ/x-y/", None),
    "password_reset_complete": ("accounts/reset/done/", "get", "/accounts/reset/done/", None),
    "schema": ("api/schema/", "get", "/api/schema/", None),
    "api_docs": ("api/docs/", "get", "/api/docs/", None),
    "health": ("api/v1/health", "get", "/api/v1/health", None),
    "submit": ("api/v1/permission-requests", "post", "/api/v1/permission-requests", "ASK"),
    "list": ("api/v1/permission-requests", "get", "/api/v1/permission-requests", None),
    "detail": ("api/v1/permission-requests/<uuid:request_id>", "get", "/api/v1/permission-requests/{req}", None),
    "cancel": (
        "api/v1/permission-requests/<uuid:request_id>/cancel",
        "post",
        "/api/v1/permission-requests/{req}/cancel",
        {},
    ),
    "decide": (
        "api/v1/permission-requests/<uuid:request_id>/decision",
        "post",
        "/api/v1/permission-requests/{req}/decision",
        {"behavior": "allow"},
    ),
    "decide_batch": ("api/v1/permission-requests/decisions", "post", "/api/v1/permission-requests/decisions", "BATCH"),
    "audit_api": ("api/v1/audit", "get", "/api/v1/audit", None),
    "analytics_api": ("api/v1/analytics/approvers", "get", "/api/v1/analytics/approvers", None),
    "tokens_list": ("api/v1/tokens", "get", "/api/v1/tokens", None),
    "token_revoke": ("api/v1/tokens/<int:token_id>", "delete", "/api/v1/tokens/999999", None),
    "pauses_api": ("api/v1/pauses", "get", "/api/v1/pauses", None),
    "pause_api_delete": ("api/v1/pauses/<int:pause_id>", "delete", "/api/v1/pauses/{pause}", None),
    "audit_csv": ("api/v1/audit", "get", "/api/v1/audit?format=csv", None),
    "rules_list": ("api/v1/rules", "get", "/api/v1/rules", None),
    "rules_create": ("api/v1/rules", "post", "/api/v1/rules", {"rule": "Bash(ls:*)", "behavior": "allow"}),
    "rules_explain": (
        "api/v1/rules/explain",
        "post",
        "/api/v1/rules/explain",
        {"tool_name": "Bash", "tool_input": {"command": "ls"}},
    ),
    "rules_what_if": ("api/v1/rules/what-if", "post", "/api/v1/rules/what-if", {"since": "2000-01-01T00:00:00Z"}),
    "rules_suggestions": ("api/v1/rules/suggestions", "get", "/api/v1/rules/suggestions", None),
    "rules_autopilot": ("api/v1/rules/autopilot", "get", "/api/v1/rules/autopilot", None),
    "chat_routes": ("api/v1/teams/<slug:team>/chat-routes", "get", "/api/v1/teams/default/chat-routes", None),
    "chat_route_put": (
        "api/v1/teams/<slug:team>/chat-routes/<str:surface>",
        "put",
        "/api/v1/teams/default/chat-routes/telegram",
        {"channel": "-100777", "approvers": ["111"]},
    ),
    "team_settings_api": ("api/v1/teams/<slug:name>/settings", "get", "/api/v1/teams/default/settings", None),
    "team_settings_patch": (
        "api/v1/teams/<slug:name>/settings",
        "patch",
        "/api/v1/teams/default/settings",
        {"approvals_required": 1},
    ),
    "team_group_put": (
        "api/v1/teams/<slug:name>/groups/<slug:group>",
        "put",
        "/api/v1/teams/default/groups/leads",
        {"members": []},
    ),
    "rules_autopilot_put": ("api/v1/rules/autopilot", "put", "/api/v1/rules/autopilot", {"enabled": False}),
    "rule_detail": ("api/v1/rules/<int:rule_id>", "get", "/api/v1/rules/{rule}", None),
    "rule_delete": ("api/v1/rules/<int:rule_id>", "delete", "/api/v1/rules/{rule}", None),
    "api_unknown": ("^api/", "get", "/api/v1/nope", None),
    "hook": ("hooks/claude-code", "post", "/hooks/claude-code", "HOOK"),
    "metrics": ("metrics", "get", "/metrics", None),
    "slack_actions": ("integrations/slack/actions", "post", "/integrations/slack/actions", {}),
    "slack_commands": ("integrations/slack/commands", "post", "/integrations/slack/commands", {}),
    "telegram_webhook": ("integrations/telegram/webhook", "post", "/integrations/telegram/webhook", {}),
    "queue": ("", "get", "/", None),
    "manifest": ("manifest.webmanifest", "get", "/manifest.webmanifest", None),
    "hook_bundle": ("agent/gatehouse-hook.pyz", "get", "/agent/gatehouse-hook.pyz", None),
    "request_page": ("requests/<uuid:request_id>/", "get", "/requests/{req}/", None),
    "request_decide_page": ("requests/<uuid:request_id>/decide", "post", "/requests/{req}/decide", {"action": "once"}),
    "decide_batch_page": ("requests/decide-batch", "post", "/requests/decide-batch", "BATCH_FORM"),
    "audit_page": ("audit/", "get", "/audit/", None),
    "audit_detail_page": ("audit/<int:decision_id>/", "get", "/audit/{decision}/", None),
    "audit_filter_save_page": ("audit/filters/", "post", "/audit/filters/", {"name": "x", "query": "behavior=deny"}),
    "audit_filter_delete_page": (
        "audit/filters/<int:filter_id>/delete/",
        "post",
        "/audit/filters/999999/delete/",
        {},
    ),
    "denials_page": ("denials/", "get", "/denials/", None),
    "rules_page": ("rules/", "get", "/rules/", None),
    "rules_explain_page": (
        "rules/explain/",
        "post",
        "/rules/explain/",
        {"tool_name": "Bash", "tool_input": '{"command": "ls"}', "mode": "default"},
    ),
    "rules_what_if_page": (
        "rules/what-if/",
        "post",
        "/rules/what-if/",
        "WHAT_IF",
    ),
    "rules_autopilot_page": (
        "rules/autopilot/",
        "post",
        "/rules/autopilot/",
        "AUTOPILOT",
    ),
    "rule_edit_page": ("rules/<int:rule_id>/edit/", "get", "/rules/{rule}/edit/", None),
    "rule_delete_page": ("rules/<int:rule_id>/delete/", "post", "/rules/{rule}/delete/", {}),
    "agents_page": ("agents/", "get", "/agents/", None),
    "agent_revoke_page": ("agents/<int:agent_id>/revoke/", "post", "/agents/{agent}/revoke/", {}),
    "agents_pause_page": ("agents/pause/", "post", "/agents/pause/", "PAUSE_FORM"),
    "pause_resume_page": ("pauses/<int:pause_id>/resume/", "post", "/pauses/{pause}/resume/", {}),
    "agent_pin_page": ("agents/<int:agent_id>/pins/", "post", "/agents/{agent}/pins/", {}),
    "profile_page": ("profile/", "get", "/profile/", None),
    "people_page": ("people/", "get", "/people/", None),
    "team_settings_page": ("teams/<slug:name>/settings/", "get", "/teams/default/settings/", None),
    "person_role_page": (
        "people/<slug:team_name>/<int:user_id>/role/",
        "post",
        "/people/default/{member}/role/",
        {"role": "viewer"},
    ),
    "person_remove_page": (
        "people/<slug:team_name>/<int:user_id>/remove/",
        "post",
        "/people/default/{member}/remove/",
        {},
    ),
    "identity_delete_page": (
        "profile/identities/<int:identity_id>/delete/",
        "post",
        "/profile/identities/{identity}/delete/",
        {},
    ),
    "push_vapid_key": ("api/v1/push/vapid-public-key", "get", "/api/v1/push/vapid-public-key", None),
    "push_subscribe": ("api/v1/push-subscriptions", "post", "/api/v1/push-subscriptions", "PUSH_SUBSCRIPTION"),
    "push_unsubscribe": (
        "api/v1/push-subscriptions/<int:subscription_id>",
        "delete",
        "/api/v1/push-subscriptions/{pushsub}",
        None,
    ),
    "push_action": ("api/v1/push-actions/<str:token>", "post", "/api/v1/push-actions/{pushtoken}", {}),
    "service_worker": ("service-worker.js", "get", "/service-worker.js", None),
    "notifications_page": ("notifications/", "get", "/notifications/", None),
    "admin": ("admin/", "get", "/admin/", None),
    "admin_login": ("admin/login/", "get", "/admin/login/", None),
}

# Reviewed by hand. Notable choices: the schema and its docs are public (they hold no
# data) but a bad token is still refused; /metrics is public by design (docs/RELAY.md:
# expose it only where Prometheus reaches; SECURITY.md); Django's password-reset pages
# answer everyone; the hook endpoint takes only an agent's bearer token, never a session.
# Pages hide other teams' objects with 404 and refuse viewers' writes with 403.
EXPECTED = """
route                   anonymous wrong_token revoked_token agent other_agent viewer approver team_admin outsider admin
login_page              200       200         200           200   200         200    200      200        200      200
logout                  302       302         302           302   302         302    302      302        302      302
password_change         302       302         302           302   302         200    200      200        200      200
password_change_done    302       302         302           302   302         200    200      200        200      200
password_reset          200       200         200           200   200         200    200      200        200      200
password_reset_done     200       200         200           200   200         200    200      200        200      200
password_reset_confirm  200       200         200           200   200         200    200      200        200      200
password_reset_complete 200       200         200           200   200         200    200      200        200      200
schema                  200       401         401           200   200         200    200      200        200      200
api_docs                200       401         401           200   200         200    200      200        200      200
health                  401       401         401           200   200         200    200      200        200      200
submit                  401       401         401           202   202         403    403      403        403      403
list                    401       401         401           403   403         200    200      200        200      200
detail                  401       401         401           202   404         202    202      202        404      202
cancel                  401       401         401           200   404         403    403      403        403      403
decide                  401       401         401           403   403         403    200      200        404      200
decide_batch            401       401         401           403   403         403    200      200        404      200
tokens_list             401       401         401           403   403         200    200      200        200      200
token_revoke            401       401         401           403   403         404    404      404        404      404
audit_api               401       401         401           403   403         200    200      200        200      200
audit_csv               401       401         401           403   403         200    200      200        200      200
analytics_api           401       401         401           403   403         200    200      200        200      200
pauses_api              401       401         401           403   403         200    200      200        200      200
pause_api_delete        401       401         401           403   403         403    403      204        404      204
rules_list              401       401         401           403   403         200    200      200        200      200
rules_create            401       401         401           403   403         403    201      201        201      201
rules_explain           401       401         401           403   403         200    200      200        200      200
rules_what_if           401       401         401           403   403         200    200      200        200      200
rules_suggestions       401       401         401           403   403         403    200      200        200      200
rules_autopilot         401       401         401           403   403         403    200      200        200      200
rules_autopilot_put     401       401         401           403   403         403    200      200        200      200
rule_detail             401       401         401           403   403         200    200      200        404      200
rule_delete             401       401         401           403   403         403    204      204        404      204
chat_routes             401       401         401           403   403         403    403      200        404      200
chat_route_put          401       401         401           403   403         403    403      200        404      200
team_settings_api       401       401         401           403   403         200    200      200        404      200
team_settings_patch     401       401         401           403   403         403    403      200        404      200
team_group_put          401       401         401           403   403         403    403      200        404      200
api_unknown             404       404         404           404   404         404    404      404        404      404
hook                    401       401         401           200   200         401    401      401        401      401
metrics                 200       200         200           200   200         200    200      200        200      200
slack_actions           404       404         404           404   404         404    404      404        404      404
slack_commands          404       404         404           404   404         404    404      404        404      404
telegram_webhook        404       404         404           404   404         404    404      404        404      404
queue                   302       302         302           302   302         200    200      200        200      200
manifest                200       200         200           200   200         200    200      200        200      200
hook_bundle             200       200         200           200   200         200    200      200        200      200
request_page            302       302         302           302   302         200    200      200        404      200
request_decide_page     302       302         302           302   302         403    302      302        404      302
decide_batch_page       302       302         302           302   302         403    302      302        404      302
audit_page              302       302         302           302   302         200    200      200        200      200
audit_filter_save_page  302       302         302           302   302         302    302      302        302      302
audit_filter_delete_page 302      302         302           302   302         404    404      404        404      404
audit_detail_page       302       302         302           302   302         200    200      200        404      200
denials_page            302       302         302           302   302         200    200      200        200      200
rules_page              302       302         302           302   302         200    200      200        200      200
rules_explain_page      302       302         302           302   302         200    200      200        200      200
rules_what_if_page      302       302         302           302   302         400    200      200        400      200
rules_autopilot_page    302       302         302           302   302         403    302      302        403      302
rule_edit_page          302       302         302           302   302         403    200      200        404      200
rule_delete_page        302       302         302           302   302         403    302      302        404      302
agents_page             302       302         302           302   302         200    200      200        200      200
agent_revoke_page       302       302         302           302   302         403    302      302        404      302
agent_pin_page          302       302         302           302   302         403    302      302        404      302
agents_pause_page       302       302         302           302   302         403    403      302        403      302
pause_resume_page       302       302         302           302   302         403    403      302        404      302
profile_page            302       302         302           302   302         200    200      200        200      200
identity_delete_page    302       302         302           302   302         404    302      404        404      404
people_page             302       302         302           302   302         403    403      200        403      200
team_settings_page      302       302         302           302   302         403    403      200        404      200
person_role_page        302       302         302           302   302         403    403      302        404      302
person_remove_page      302       302         302           302   302         403    403      302        404      302
push_vapid_key          200       401         401           200   200         200    200      200        200      200
push_subscribe          401       401         401           403   403         201    201      201        201      201
push_unsubscribe        401       401         401           403   403         404    204      404        404      404
push_action             200       200         200           200   200         200    200      200        200      200
service_worker          200       200         200           200   200         200    200      200        200      200
notifications_page      302       302         302           302   302         200    200      200        200      200
admin                   302       302         302           302   302         302    302      302        302      200
admin_login             200       200         200           200   200         200    200      200        200      200
"""


def walk(patterns: list[Any], prefix: str = "") -> Iterator[str]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            if str(pattern.pattern) == "admin/":
                yield "admin/"  # Django's admin: its own permission system, one row stands for it
                continue
            yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern)


def expected_table() -> dict[tuple[str, str], int]:
    lines = [line.split() for line in EXPECTED.strip().splitlines()]
    if not lines:
        return {}
    header = lines[0][1:]
    return {(row[0], persona): int(code) for row in lines[1:] for persona, code in zip(header, row[1:], strict=True)}


class RouteCoverageTests:
    def test_it_has_a_row_for_every_route_the_server_answers(self) -> None:
        routes = set(walk(get_resolver().url_patterns))
        covered = {route for route, _, _, _ in CELLS.values()}
        assert routes - covered == set(), "add these routes to CELLS and EXPECTED"


def hook_body(n: int) -> dict[str, Any]:
    # dontAsk resolves an ask to deny at once, so the hook answers without waiting for a person.
    return {
        "hook_event_name": "PreToolUse",
        "session_id": "s1",
        "cwd": "/tmp/proj",
        "permission_mode": "dontAsk",
        "transcript_path": "",
        "tool_name": "Bash",
        "tool_input": {"command": "rm -rf build"},
        "tool_use_id": f"toolu_matrix_{n}",
    }


@pytest.fixture
def push_service(settings: Any) -> Iterator[None]:
    from tests.fakes.webpush import fake_push_service

    with fake_push_service() as fake:
        settings.GATEHOUSE_PUSH_SERVICES = ["127.0.0.1"]
        PUSH_SERVICE[0] = fake.url
        yield


@pytest.fixture
def callers(
    ci_bot: AgentPersona,
    other_bot: AgentPersona,
    alice: Any,
    bob: Any,
    carol: Any,
    mallory: Any,
    admin: Any,
    default_team: Any,
) -> dict[str, Callable[[], Client]]:
    revoked, revoked_token = services.agent_create(name="retired-bot", team=default_team)
    services.agent_revoke(agent=revoked)

    def bearer(token: str) -> Callable[[], Client]:
        return lambda: Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def session(user: Any) -> Callable[[], Client]:
        def make() -> Client:
            client = Client()
            client.force_login(user)
            return client

        return make

    return {
        "anonymous": Client,
        "wrong_token": bearer("gha_not-a-real-token-at-all"),
        "revoked_token": bearer(revoked_token),
        "agent": bearer(ci_bot.token),
        "other_agent": bearer(other_bot.token),
        "viewer": session(bob),
        "approver": session(alice),
        "team_admin": session(carol),
        "outsider": session(mallory),
        "admin": session(admin),
    }


def fresh_objects(template: str, n: int, ci_bot: AgentPersona, alice: Any, default_team: Any) -> dict[str, Any]:
    """Create, for one cell, a fresh object for each placeholder its route names (and no others)."""
    found: dict[str, Any] = {}
    if "{req}" in template:
        found["req"] = services.request_submit(agent=ci_bot.agent, call={**ASK, "tool_use_id": f"m{n}"}).request.pk
    if "{decision}" in template:
        decided = services.request_submit(agent=ci_bot.agent, call={**ASK, "tool_use_id": f"d{n}"}).request
        services.request_decide(decided.pk, services.Answer(behavior="deny", surface="api", user=alice))
        found["decision"] = Decision.objects.get(request=decided).pk
    if "{rule}" in template:
        rule = Rule.objects.create(rule="Bash(make:*)", behavior="allow", source="localSettings", team=default_team)
        found["rule"] = rule.pk
    if "{agent}" in template:
        found["agent"] = services.agent_create(name=f"spare-{n}", team=default_team)[0].pk
    if "{pause}" in template:
        found["pause"] = Pause.objects.create(team=default_team, answer="deny").pk
    if "{member}" in template:
        found["member"] = services.person_add(username=f"member-{n}", team=default_team, role="approver").pk
    if "{pushsub}" in template:
        found["pushsub"] = PushSubscription.objects.create(
            user=alice, endpoint=f"{PUSH_SERVICE[0]}/push/{n}", p256dh=P256DH, auth="AAAAAAAAAAAAAAAAAAAAAA"
        ).pk
    if "{pushtoken}" in template:
        from relay.push.services import action_tokens_issue

        asked = services.request_submit(agent=ci_bot.agent, call={**ASK, "tool_use_id": f"p{n}"}).request
        found["pushtoken"] = action_tokens_issue(request=asked, user=alice, channel="webpush", actions=["deny"])["deny"]
    if "{identity}" in template:
        identity = ChatIdentity.objects.create(user=alice, provider="telegram", external_id=str(1000 + n))
        found["identity"] = identity.pk
    return found


def actual_table(
    callers: dict[str, Callable[[], Client]], ci_bot: AgentPersona, alice: Any, default_team: Any
) -> dict[tuple[str, str], int]:
    counter = itertools.count()
    table: dict[tuple[str, str], int] = {}
    for name, (_, method, template, body) in CELLS.items():
        for persona in PERSONAS:
            n = next(counter)
            path = template.format(**fresh_objects(template, n, ci_bot, alice, default_team))
            named = {"ASK": {**ASK, "tool_use_id": f"s{n}"}, "HOOK": hook_body(n), **team_forms(default_team)}
            if body in ("BATCH", "BATCH_FORM"):  # a fresh pending request to decide in a batch of one
                ids = [str(fresh_objects("{req}", n, ci_bot, alice, default_team)["req"])]
                named["BATCH"] = {"ids": ids, "behavior": "deny"}
                named["BATCH_FORM"] = {"ids": ids, "action": "deny"}
            named["PUSH_SUBSCRIPTION"] = {**PUSH_SUBSCRIPTION, "endpoint": f"{PUSH_SERVICE[0]}/push/matrix-{n}"}
            payload = named.get(body, body) if isinstance(body, str) else body
            client = callers[persona]()
            if payload is None:
                response = getattr(client, method)(path)
            elif path.startswith(("/api/", "/hooks/")):
                response = getattr(client, method)(path, data=payload, content_type="application/json")
            else:
                response = getattr(client, method)(path, data=payload)
            table[(name, persona)] = response.status_code
            Pause.objects.all().delete()  # a stop switch set by one cell must not answer the next
    return table


def team_forms(team: Any) -> dict[str, dict[str, Any]]:
    """Page forms that name the default team by its id."""
    rule = {"rule": "Bash(ls:*)", "behavior": "allow", "source": "localSettings", "scope": "global"}
    autopilot = {"approvals": "5", "trial_hours": "24", "window_days": "30"}
    return {
        "WHAT_IF": {**rule, "team": team.pk},
        "AUTOPILOT": {**autopilot, "team": team.pk},
        "PAUSE_FORM": {"team": team.pk, "answer": "deny"},
    }


def format_table(table: dict[tuple[str, str], int]) -> str:
    rows = [f"{'route':<24}" + " ".join(f"{p:<13}" for p in PERSONAS)]
    for name in CELLS:
        rows.append(f"{name:<24}" + " ".join(f"{table[(name, p)]:<13}" for p in PERSONAS))
    return "\n".join(rows)


# Transactional: the Claude Code hook view is async and runs its ORM work in other threads.
@pytest.mark.django_db(transaction=True)
class HttpAccessMatrixTests:
    def test_it_gives_every_caller_exactly_the_expected_status_on_every_route(
        self,
        callers: dict[str, Callable[[], Client]],
        ci_bot: AgentPersona,
        alice: Any,
        default_team: Any,
        push_service: None,
    ) -> None:
        actual = actual_table(callers, ci_bot, alice, default_team)
        expected = expected_table()
        wrong = {cell: (actual[cell], code) for cell, code in expected.items() if actual[cell] != code}
        assert set(expected) == set(actual), "EXPECTED must have a row per CELLS entry:\n" + format_table(actual)
        assert wrong == {}, "cells as (actual, expected):\n" + repr(wrong) + "\n" + format_table(actual)
