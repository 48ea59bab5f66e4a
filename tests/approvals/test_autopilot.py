"""The autopilot: after repeated approvals it allows a narrow pattern on trial; undo is one tap."""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals import learning, selectors, services
from approvals.audit import CURRENT_FORMAT, chain_head, verify_chain
from approvals.models import AuditKind, Decision, PermissionRequest, Rule, RuleSource, Team
from policy.learning import rule_decides
from tests.conftest import AgentPersona
from tests.policy.calls import gather


@pytest.fixture
def submit(ci_bot: AgentPersona) -> Callable[..., Any]:
    """`submit("npm run test", session="s2")`: ci-bot proposes a call; returns the SubmitResult."""
    counter = iter(range(100_000))

    def make(command: str = "", *, session: str = "s1", **call: Any) -> Any:
        call = {"tool_name": "Bash", "tool_input": {"command": command}, "cwd": "/tmp/proj", **call}
        call.update(session_id=session, tool_use_id=f"toolu_{next(counter)}")
        # As Gatehouse's hook sends it: with the agent machine's facts.
        call.setdefault("facts", gather(call["tool_name"], call["tool_input"], call["cwd"]))
        return services.request_submit(agent=ci_bot.agent, call=call)

    return make


@pytest.fixture(params=["service", "api"])
def approve(request: pytest.FixtureRequest, submit: Any, api_as: Any, alice: Any) -> Callable[..., Any]:
    """`approve("npm run test", session="s2")`: ci-bot asks and Alice answers (allow by default),
    through the service and over the API: every test holds both."""

    def make(command: str = "", *, behavior: str = "allow", session: str = "s1", **call: Any) -> Any:
        result = submit(command, session=session, **call)
        assert result.decision is None, f"the engine should ask for {command or call}"
        if request.param == "api":
            url = f"/api/v1/permission-requests/{result.request.pk}/decision"
            response = api_as(alice).post(url, {"behavior": behavior})
            assert response.status_code == 200, response.content
        else:
            services.request_decide(
                result.request.pk, services.Answer(behavior=behavior, surface="api", decided_by="alice")
            )
        return result.request

    return make


def autopilot_on(approvals: int = 3, trial_hours: int = 24) -> None:
    services.autopilot_configure(
        team=services.default_team(), enabled=True, approvals=approvals, trial_hours=trial_hours
    )


def autopilot_rules() -> list[Rule]:
    return list(Rule.objects.filter(source=RuleSource.AUTOPILOT))


@pytest.mark.django_db
class AutopilotTests:
    def test_it_is_off_unless_a_team_turns_it_on(self, approve: Any) -> None:
        for i in range(6):
            approve("npm run test", session=f"s{i}")
        assert autopilot_rules() == []

    def test_it_saves_a_narrow_trial_rule_after_n_approvals_in_distinct_sessions(
        self, approve: Any, submit: Any
    ) -> None:
        autopilot_on(approvals=3, trial_hours=6)
        approve("npm run test", session="s1")
        approve("npm run test -- --watch", session="s2")
        assert autopilot_rules() == []
        approve("npm run test", session="s3")
        [rule] = autopilot_rules()
        assert (rule.rule, rule.behavior, rule.scope) == ("Bash(npm run test:*)", "allow", "global")
        assert rule.expires_at is not None
        assert abs(rule.expires_at - (timezone.now() + timedelta(hours=6))) < timedelta(minutes=1)
        assert "3 approvals in 3 sessions" in rule.note

    def test_it_writes_each_promotion_as_one_audit_row_in_the_chain(
        self, approve: Any, submit: Any, alice: Any
    ) -> None:
        autopilot_on(approvals=3, trial_hours=7 * 24)
        approve("npm run test", session="s1")
        approve("npm run test", session="s2")
        assert not Decision.objects.filter(kind=AuditKind.AUTOPILOT).exists()
        trigger = approve("npm run test", session="s3")
        [rule] = autopilot_rules()
        [row] = Decision.objects.filter(kind=AuditKind.AUTOPILOT)
        # After the person's allow that earned it, on the same request, and the chain's head.
        assert row.request_id == trigger.pk
        assert row.pk > Decision.objects.get(request=trigger, kind=AuditKind.DECISION).pk
        assert row.hash == chain_head() and row.format == CURRENT_FORMAT
        assert (row.behavior, row.reason_type, row.rule, row.rule_source) == (
            "allow",
            "autopilot",
            "Bash(npm run test:*)",
            "autopilot",
        )
        assert (row.decided_by, row.surface) == ("autopilot", "autopilot")
        assert row.message == "autopilot saved Bash(npm run test:*) for a 7-day trial"
        assert rule.expires_at is not None
        assert row.reason["expires_at"] == rule.expires_at.isoformat()
        assert (row.reason["rule_id"], row.reason["trial_hours"], row.reason["note"]) == (rule.pk, 168, rule.note)
        assert (row.reason["approvals"], row.reason["sessions"]) == (3, 3)
        assert list(verify_chain()) == []
        out = io.StringIO()
        call_command("audit_verify", stdout=out, stderr=io.StringIO())
        assert "audit chain intact" in out.getvalue()
        # The calls the rule then allows are the autopilot's approvals (its feed) and the
        # monitor's decisions; the promotion is neither.
        allowed = submit("npm run test -- --ci", session="s4").decision
        assert allowed is not None
        assert Decision.objects.filter(kind=AuditKind.AUTOPILOT).count() == 1
        assert [d.pk for d in selectors.autopilot_approvals(alice)] == [allowed.pk]
        assert selectors.decision_period(alice, row.created_at, timezone.now() + timedelta(seconds=1))["decided"] == 1
        # The request's timeline says it after the decision.
        trigger = PermissionRequest.objects.select_related("agent", "decision").get(pk=trigger.pk)
        steps = [(s["step"], s["detail"]) for s in selectors.request_timeline(trigger, trigger.decision)]
        assert steps[-2] == ("autopilot", "saved Bash(npm run test:*) for a 7-day trial")
        assert steps[-3][0] == "decided"

    def test_it_says_an_hours_trial_in_hours(self, approve: Any) -> None:
        autopilot_on(approvals=2, trial_hours=30)
        approve("make docs", session="s1")
        approve("make docs", session="s2")
        [row] = Decision.objects.filter(kind=AuditKind.AUTOPILOT)
        assert row.message == "autopilot saved Bash(make docs:*) for a 30-hour trial"

    def test_it_says_autopilot_in_the_audit_log_of_every_approval_it_makes(self, approve: Any, submit: Any) -> None:
        autopilot_on()
        for i in range(3):
            approve("npm run test", session=f"s{i}")
        result = submit("npm run test -- --grep login", session="s9")
        assert result.decision is not None
        row = Decision.objects.get(pk=result.decision.pk)
        assert (row.behavior, row.rule, row.rule_source) == ("allow", "Bash(npm run test:*)", "autopilot")
        assert row.decided_by == "autopilot Bash(npm run test:*)"
        assert row.reason["source"] == "autopilot"
        assert submit("npm run build", session="s9").decision is None  # nothing wider

    def test_it_needs_distinct_sessions(self, approve: Any) -> None:
        autopilot_on()
        for _ in range(5):
            approve("cargo build", session="same")
        assert autopilot_rules() == []

    def test_it_never_promotes_a_pattern_a_person_denied_in_the_window(self, approve: Any) -> None:
        autopilot_on()
        approve("npm run test -- --update-snapshots", behavior="deny", session="s0")
        for i in range(1, 5):
            approve("npm run test -- --fast", session=f"s{i}")
        assert autopilot_rules() == []

    def test_it_demotes_at_the_first_denial(self, approve: Any, submit: Any, api_as: Any, alice: Any) -> None:
        autopilot_on()
        waiting = submit("npm run test -- --all", session="s0").request
        for i in range(1, 4):
            approve("npm run test", session=f"s{i}")
        assert [r.rule for r in autopilot_rules()] == ["Bash(npm run test:*)"]
        response = api_as(alice).post(
            f"/api/v1/permission-requests/{waiting.pk}/decision", {"behavior": "deny", "message": "not all of them"}
        )
        assert response.status_code == 200, response.content
        assert autopilot_rules() == []
        assert Decision.objects.get(request=waiting).reason["demoted_autopilot"] == ["Bash(npm run test:*)"]
        assert submit("npm run test", session="s5").decision is None  # asked again

    def test_it_is_revoked_with_one_delete(self, approve: Any, submit: Any, api_as: Any, alice: Any) -> None:
        autopilot_on()
        for i in range(3):
            approve("make docs", session=f"s{i}")
        [rule] = autopilot_rules()
        assert api_as(alice).call("delete", f"/api/v1/rules/{rule.pk}").status_code == 204
        assert submit("make docs", session="s8").decision is None

    def test_it_never_promotes_destructive_calls(self, approve: Any) -> None:
        autopilot_on()
        for i in range(4):
            approve("git push --force origin main", session=f"s{i}")
            approve("rm -rf build", session=f"s{i}")
        assert autopilot_rules() == []

    def test_it_never_promotes_a_call_a_policy_settings_rule_reserves(self, approve: Any) -> None:
        team = services.default_team()
        services.rule_create(rule="Bash(npm publish:*)", behavior="ask", source="policySettings", team=team)
        autopilot_on()
        for i in range(4):
            approve("npm publish", session=f"s{i}")
        assert autopilot_rules() == []

    def test_it_never_promotes_a_protected_path(self, approve: Any, tmp_path: Path) -> None:
        (tmp_path / ".git").mkdir()
        config = tmp_path / ".git" / "config"
        config.write_text("[core]\n")
        autopilot_on()
        edit = {"file_path": str(config), "old_string": "[core]", "new_string": "[core]\n\tbare = false"}
        for i in range(4):
            approve(tool_name="Edit", tool_input=edit, cwd=str(tmp_path), session=f"s{i}")
        assert autopilot_rules() == []

    def test_it_refuses_settings_out_of_range(self) -> None:
        with pytest.raises(services.ServiceError):
            services.autopilot_configure(team=services.default_team(), enabled=True, approvals=1)


@pytest.mark.django_db
class AutopilotApiTests:
    def test_it_is_off_by_default_and_approvers_turn_it_on(self, api_as: Any, alice: Any, bob: Any) -> None:
        api = api_as(alice)
        assert api.get("/api/v1/rules/autopilot").json() == {
            "team": "default",
            "enabled": False,
            "approvals": 5,
            "trial_hours": 24,
            "window_days": 30,
            "rules": [],
        }
        response = api.call("put", "/api/v1/rules/autopilot", {"enabled": True, "approvals": 3, "trial_hours": 2})
        assert response.status_code == 200, response.content
        assert (response.json()["enabled"], response.json()["approvals"], response.json()["trial_hours"]) == (
            True,
            3,
            2,
        )
        assert api_as(bob).call("put", "/api/v1/rules/autopilot", {"enabled": False}).status_code == 403
        assert api.call("put", "/api/v1/rules/autopilot", {"enabled": True, "approvals": 1}).status_code == 400
        assert api.call("put", "/api/v1/rules/autopilot", {"approvals": 3}).status_code == 400

    def test_it_lists_the_rules_it_saved(self, api_as: Any, alice: Any, approve: Any) -> None:
        autopilot_on()
        for i in range(3):
            approve("make docs", session=f"s{i}")
        rules = api_as(alice).get("/api/v1/rules/autopilot").json()["rules"]
        assert [(r["rule"], r["source"]) for r in rules] == [("Bash(make docs:*)", "autopilot")]


@pytest.mark.django_db
class AutopilotPageTests:
    def test_it_is_turned_on_revoked_with_one_tap_and_shows_its_feed(
        self, alice: Any, bob: Any, approve: Any, submit: Any
    ) -> None:
        from django.test import Client

        client = Client()
        client.force_login(alice)
        team = services.default_team().pk
        form = {"team": team, "enabled": "on", "approvals": "3", "trial_hours": "24", "window_days": "30"}
        assert client.post("/rules/autopilot/", form).status_code == 302
        viewer = Client()
        viewer.force_login(bob)
        assert viewer.post("/rules/autopilot/", {**form, "enabled": ""}).status_code == 403
        for i in range(3):
            approve("make docs", session=f"s{i}")
        assert submit("make docs '<b>now</b>'", session="s7").decision is not None
        html = client.get("/rules/").content.decode()
        panel = html[html.index('id="autopilot"') :]
        assert "Bash(make docs:*)" in panel and "Revoke" in panel
        assert "make docs &#x27;&lt;b&gt;now&lt;/b&gt;&#x27;" in panel  # the feed, escaped
        [rule] = autopilot_rules()
        assert client.post(f"/rules/{rule.pk}/delete/").status_code == 302
        assert autopilot_rules() == []


# Commands that share prefixes, so one answer's narrow rule covers others' calls.
PROGRAMS = ["npm run test", "npm run lint", "pytest", "make docs", "cargo build"]
ARGUMENTS = ["", " -k a", " --all", " x.txt", " && ls"]


@pytest.mark.django_db
class AutopilotPromiseTests:
    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        st.lists(
            st.tuples(
                st.sampled_from(PROGRAMS),
                st.sampled_from(ARGUMENTS),
                st.sampled_from(["allow", "allow", "deny"]),
                st.sampled_from(["s1", "s2", "s3"]),
            ),
            min_size=2,
            max_size=14,
        )
    )
    def test_it_never_keeps_an_autopilot_or_suggested_rule_that_allows_a_denied_call(
        self, answers: list[tuple[str, str, str, str]]
    ) -> None:
        # One fresh team per example: the audit log is append-only, so examples cannot be undone.
        team = Team.objects.create(name=f"prop-{uuid.uuid4().hex[:12]}")
        agent, _ = services.agent_create(name="prop-bot", team=team)
        services.autopilot_configure(team=team, enabled=True, approvals=2)
        for n, (program, argument, behavior, session) in enumerate(answers):
            call = {"tool_name": "Bash", "tool_input": {"command": program + argument}, "cwd": "/tmp/proj"}
            result = services.request_submit(agent=agent, call={**call, "session_id": session, "tool_use_id": f"p{n}"})
            if result.decision is None:
                services.request_decide(
                    result.request.pk, services.Answer(behavior=behavior, surface="api", decided_by="al")
                )
        denied = [
            learning.request_engine_input(r)
            for r in PermissionRequest.objects.filter(
                team=team, decision__reason_type="user", decision__behavior="deny"
            )
        ]
        now = timezone.now()
        suggested = learning.rule_suggestions(team_id=team.pk, since=now - timedelta(days=1), until=now, min_calls=2)
        allowing = [r.rule for r in Rule.objects.filter(team=team, source=RuleSource.AUTOPILOT)]
        allowing += [s.rule for s in suggested if s.behavior == "allow"]
        for rule in allowing:
            assert not any(rule_decides(rule, "allow", doc) for doc in denied), (rule, answers)
