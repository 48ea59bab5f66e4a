"""The escalation ladder: remind, escalate to on-call, then the timeout decides, across sweeper restarts.

The sweeper runs as production runs it, `manage.py run_sweeper` in a process of its own.
The test moves each step's time to now instead of waiting for it, so it waits only for
the sweeper.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from approvals import services
from approvals.cards import render_card
from approvals.models import AuditKind, Decision, PermissionRequest
from tests.live import sweeper_process
from tests.relay.bridges.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

# A bound, not a pause: a sweeper process starts in a second, but under a full test run on
# a shared 2-core machine its imports have taken far longer.
SWEEPER_TIMEOUT = 60.0

CALL = {"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "session_id": "s1", "cwd": "/repo"}


def kinds(request: Any) -> list[str]:
    return list(Decision.objects.filter(request_id=request.pk).order_by("id").values_list("kind", flat=True))


def now_due(request: Any, field: str) -> None:
    PermissionRequest.objects.filter(pk=request.pk).update(**{field: timezone.now()})


class LadderPlanTests:
    def test_every_step_falls_inside_the_deadline_and_a_shorter_rule_deadline_skips_later_steps(
        self, ci_bot: Any, default_team: Any
    ) -> None:
        services.team_settings_update(team=default_team, ask_timeout=300, remind_after=60, escalate_after=120)
        request: Any = services.request_submit(agent=ci_bot.agent, call={**CALL, "tool_use_id": "p1"}).request
        assert request.created_at < request.remind_at < request.escalate_at < request.deadline_at
        assert (request.deadline_at - request.created_at).total_seconds() == pytest.approx(300, abs=2)

        services.rule_create(
            rule="Bash(rm:*)", behavior="ask", source="localSettings", team=default_team, ask_timeout=90
        )
        short: Any = services.request_submit(agent=ci_bot.agent, call={**CALL, "tool_use_id": "p2"}).request
        assert (short.deadline_at - short.created_at).total_seconds() == pytest.approx(90, abs=2)
        assert short.remind_at is not None and short.escalate_at is None

    def test_a_deferred_headless_ask_waits_for_the_teams_deferred_deadline(
        self, ci_bot: Any, default_team: Any
    ) -> None:
        services.team_settings_update(team=default_team, ask_timeout=300, deferred_timeout=7200)
        request: Any = services.request_submit(agent=ci_bot.agent, call={**CALL, "tool_use_id": "d1"}).request
        assert (request.deadline_at - request.created_at).total_seconds() == pytest.approx(300, abs=2)
        assert services.request_defer(request=request)
        request.refresh_from_db()
        assert request.evaluation["deferred"] is True
        assert (request.deadline_at - request.created_at).total_seconds() == pytest.approx(7200, abs=2)

    def test_a_step_outside_the_team_deadline_is_refused(self, default_team: Any) -> None:
        with pytest.raises(services.ServiceError, match="inside the deadline"):
            services.team_settings_update(team=default_team, ask_timeout=60, escalate_after=60)


class LadderSweeperTests:
    def test_it_reminds_escalates_and_times_out_once_each_across_a_restart(
        self, ci_bot: Any, alice: Any, default_team: Any
    ) -> None:
        services.team_settings_update(team=default_team, remind_after=100, escalate_after=200, ask_timeout=300)
        request = services.request_submit(agent=ci_bot.agent, call={**CALL, "tool_use_id": "s1"}).request
        with sweeper_process(interval=0.2):
            now_due(request, "remind_at")
            wait_until(lambda: AuditKind.REMINDER in kinds(request), SWEEPER_TIMEOUT)
        # A new sweeper process carries on from the rows: the next step, then the deadline.
        with sweeper_process(interval=0.2), sweeper_process(interval=0.2):
            now_due(request, "escalate_at")
            wait_until(lambda: AuditKind.ESCALATION in kinds(request), SWEEPER_TIMEOUT)
            card = render_card(PermissionRequest.objects.get(pk=request.pk), alice)
            now_due(request, "deadline_at")
            wait_until(lambda: AuditKind.DECISION in kinds(request), SWEEPER_TIMEOUT)
        assert kinds(request) == ["reminder", "escalation", "decision"]
        timeout = Decision.objects.get(request_id=request.pk, kind=AuditKind.DECISION)
        assert (timeout.behavior, timeout.reason_type) == ("deny", "timeout")
        escalation = Decision.objects.get(request_id=request.pk, kind=AuditKind.ESCALATION)
        assert escalation.reason["group"] == "on_call"
        assert "Reminded at" in card and "Escalated to on_call at" in card
