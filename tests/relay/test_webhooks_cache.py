"""A team's webhooks are read once per rules version, and every change to one reaches the very next call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import selectors, services
from approvals.models import Team
from relay.models import Webhook
from relay.webhooks import webhook_create
from tests.relay.fake_webhook import fake_webhook

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "webhook-secret-0123456789"
GIT_STATUS = {"tool_name": "Bash", "tool_input": {"command": "git status"}, "session_id": "s1", "cwd": "/srv/app"}
DENY = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}}


def _hook(team: Any, **fields: Any) -> Webhook:
    values = {"name": "guard", "url": "http://127.0.0.1:9/", "event": "PreToolUse", "secret": SECRET, **fields}
    return Webhook.objects.create(team=team, **values)


# Every way a webhook is written, from the services to a shell's queryset: (what it
# does, which teams' versions it must change: "team", or "both" when it moves a hook).
WRITES: dict[str, tuple[Callable[[Any, Any], object], str]] = {
    "created by the service": (
        lambda team, other: webhook_create(
            team=team, name="new", url="http://127.0.0.1:9/", event="PreToolUse", secret=SECRET
        ),
        "team",
    ),
    "created in the ORM": (lambda team, other: _hook(team, name="new"), "team"),
    "saved": (lambda team, other: _save(Webhook.objects.get(team=team), on_error="deny"), "team"),
    "disabled in a queryset": (lambda team, other: Webhook.objects.filter(team=team).update(enabled=False), "team"),
    "event changed in a queryset": (
        lambda team, other: Webhook.objects.filter(team=team).update(event="PermissionRequest"),
        "team",
    ),
    "deleted": (lambda team, other: Webhook.objects.get(team=team).delete(), "team"),
    "deleted in a queryset": (lambda team, other: Webhook.objects.filter(team=team).delete(), "team"),
    "moved to another team": (lambda team, other: Webhook.objects.filter(team=team).update(team=other), "both"),
}


def _save(hook: Webhook, **fields: Any) -> None:
    for name, value in fields.items():
        setattr(hook, name, value)
    hook.save()


def _behavior(agent: Any, tool_use_id: str) -> str:
    result = services.request_submit(agent=agent, call={**GIT_STATUS, "tool_use_id": tool_use_id})
    assert result.decision is not None, "expected a decision at submit"
    return result.decision.behavior


class WebhookVersionTests:
    @pytest.mark.parametrize("write", list(WRITES))
    def test_every_write_to_a_webhook_gives_its_team_a_new_rules_version(
        self, default_team: Any, other_team: Any, write: str
    ) -> None:
        third_team = Team.objects.create(name="third")
        _hook(default_team)
        _hook(third_team)
        before = {team.pk: selectors.rules_version(team.pk) for team in (default_team, other_team, third_team)}
        change, changes = WRITES[write]
        change(default_team, other_team)
        after = {team.pk: selectors.rules_version(team.pk) for team in (default_team, other_team, third_team)}
        assert after[default_team.pk] != before[default_team.pk]
        assert (after[other_team.pk] != before[other_team.pk]) == (changes == "both")
        assert after[third_team.pk] == before[third_team.pk]


class WebhookCacheTests:
    def test_a_webhook_written_behind_the_services_back_reaches_the_very_next_call(
        self, ci_bot: Any, default_team: Any
    ) -> None:
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=default_team)
        with fake_webhook(lambda body: (200, DENY, 0)) as guard:
            assert _behavior(ci_bot.agent, "toolu_1") == "allow"  # no webhook yet: none kept
            # As the admin, a shell or another process would: no service call at all.
            hook = _hook(default_team, url=guard.url)
            assert _behavior(ci_bot.agent, "toolu_2") == "deny"
            Webhook.objects.filter(pk=hook.pk).update(enabled=False)
            assert _behavior(ci_bot.agent, "toolu_3") == "allow"
            Webhook.objects.filter(pk=hook.pk).update(enabled=True, on_error="deny", url="http://127.0.0.1:9/")
            assert _behavior(ci_bot.agent, "toolu_4") == "deny"  # unreachable, and set to deny on error
        assert len(guard.calls) == 1

    def test_the_team_webhooks_are_read_once_per_rules_version(self, ci_bot: Any, default_team: Any) -> None:
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=default_team)
        with fake_webhook(lambda body: (200, {}, 0)) as silent:
            _hook(default_team, url=silent.url)
            reads = []
            for n in range(3):
                with CaptureQueriesContext(connection) as queries:
                    assert _behavior(ci_bot.agent, f"toolu_{n}") == "allow"
                reads.append(sum(Webhook._meta.db_table in query["sql"] for query in queries.captured_queries))
        assert reads == [1, 0, 0]
        assert len(silent.calls) == 3  # asked on every call all the same
