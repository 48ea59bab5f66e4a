"""Quorum: a call that needs N approvals from distinct people, counted once each, audited each."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from approvals import services
from approvals.audit import verify_chain
from approvals.models import Decision, RequestState
from tests.conftest import _person

pytestmark = pytest.mark.django_db

RM = {"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "session_id": "s1", "cwd": "/repo"}


@pytest.fixture
def carol(default_team: Any) -> Any:
    """Carol approves in the default team too: the second person of a quorum."""
    return _person("carol", default_team, "approver")


@pytest.fixture
def dave(default_team: Any) -> Any:
    return _person("dave", default_team, "approver")


def quorum_rule(team: Any, rule: str = "Bash(rm:*)", n: int = 2, group: str = "") -> Any:
    return services.rule_create(
        rule=rule, behavior="ask", source="localSettings", team=team, approvals_required=n, approver_group=group
    )


_ids = itertools.count()


def submit(agent: Any, **call: Any) -> Any:
    return services.request_submit(agent=agent, call={**RM, "tool_use_id": f"toolu_q{next(_ids)}", **call})


def approve(request: Any, user: Any, surface: str = "web") -> services.DecideResult:
    return services.request_decide(request.pk, services.Answer(behavior="allow", surface=surface, user=user))


def rows(request: Any) -> list[tuple[str, str, str]]:
    found = Decision.objects.filter(request_id=request.pk).order_by("id")
    return [(d.kind, d.behavior, d.decided_by) for d in found]


class QuorumRuleTests:
    def test_it_allows_only_once_two_distinct_people_approved_and_audits_each_vote(self, ci_bot, alice, carol):
        quorum_rule(ci_bot.agent.team)
        request = submit(ci_bot.agent).request
        assert request.state == RequestState.PENDING
        assert request.evaluation["quorum"]["required"] == 2

        first = approve(request, alice)
        assert first.won and first.decision is None
        assert first.progress == "1 of 2 — alice approved"
        request.refresh_from_db()
        assert request.state == RequestState.PENDING

        with pytest.raises(services.ServiceError, match="already approved"):
            approve(request, alice, surface="telegram")

        second = approve(request, carol, surface="slack")
        assert second.won and second.decision is not None
        assert second.decision.behavior == "allow"
        assert second.decision.reason["approvers"] == ["alice", "carol"]
        assert second.decision.decided_by == "alice and carol"
        assert rows(request) == [
            ("vote", "allow", "alice"),
            ("vote", "allow", "carol"),
            ("decision", "allow", "alice and carol"),
        ]
        assert list(verify_chain()) == []
        from approvals import selectors

        timeline = selectors.request_timeline(second.request, second.decision)
        assert [s["detail"] for s in timeline if s["step"] == "approved"] == [
            "alice via web (1 of 2)",
            "carol via slack (2 of 2)",
        ]

    def test_one_deny_ends_it_and_names_who_had_approved(self, ci_bot, alice, carol):
        quorum_rule(ci_bot.agent.team)
        request = submit(ci_bot.agent).request
        approve(request, alice)
        denied = services.request_decide(request.pk, services.Answer(behavior="deny", surface="web", user=carol))
        assert denied.won and denied.decision is not None and denied.decision.behavior == "deny"
        assert denied.decision.reason["approvers"] == ["alice"]
        late = approve(request, carol)
        assert not late.won

    def test_where_several_rules_match_the_largest_quorum_wins(self, ci_bot, alice, carol, dave):
        quorum_rule(ci_bot.agent.team, "Bash(rm:*)", 2)
        quorum_rule(ci_bot.agent.team, "Bash(rm -rf:*)", 3)
        quorum_rule(ci_bot.agent.team, "Bash(git push:*)", 5)  # does not match
        request = submit(ci_bot.agent).request
        assert request.evaluation["quorum"]["required"] == 3
        approve(request, alice)
        assert approve(request, carol).decision is None
        assert approve(request, dave).decision is not None

    def test_only_people_count_no_grant_no_edit_no_unlinked_chat_user(self, ci_bot, alice):
        quorum_rule(ci_bot.agent.team)
        request = submit(ci_bot.agent).request
        with pytest.raises(services.ServiceError, match="Only people"):
            services.request_decide(request.pk, services.Answer(behavior="allow", surface="webhook", decided_by="bot"))
        with pytest.raises(services.ServiceError, match="Only people"):
            services.request_decide(
                request.pk,
                services.Answer(behavior="allow", surface="classifier", user=alice, reason_type="classifier"),
            )
        with pytest.raises(services.ServiceError, match="as it is, once"):
            services.request_decide(
                request.pk, services.Answer(behavior="allow", surface="web", user=alice, remember="always")
            )
        from approvals import selectors

        assert selectors.grant_rule_for(request) is None  # no "Always allow" on any surface
        assert rows(request) == []

    def test_the_owner_of_the_agent_never_counts_when_the_team_says_so(self, ci_bot, alice, carol):
        services.team_settings_update(team=ci_bot.agent.team, exclude_owner=True)
        ci_bot.agent.owner = alice
        ci_bot.agent.save()
        quorum_rule(ci_bot.agent.team)
        request = submit(ci_bot.agent).request
        with pytest.raises(services.ServiceError, match="You own this agent"):
            approve(request, alice)
        assert approve(request, carol).progress == "1 of 2 — carol approved"

    def test_a_group_quorum_counts_only_its_members_until_escalated_to_on_call(self, ci_bot, alice, carol, dave):
        from relay.sweeper import climb_ladder

        team = ci_bot.agent.team
        services.team_group_set(team=team, group="leads", usernames=["alice", "carol"])
        services.team_group_set(team=team, group="on_call", usernames=["dave"])
        services.team_settings_update(team=team, escalate_after=60)
        quorum_rule(team, group="leads")
        request = submit(ci_bot.agent).request
        with pytest.raises(services.ServiceError, match="leads group"):
            approve(request, dave)
        type(request).objects.filter(pk=request.pk).update(escalate_at=request.created_at)
        assert climb_ladder() == 1
        assert approve(request, dave).progress == "1 of 2 (from leads) — dave approved"


class RiskClassTests:
    def test_an_allow_rule_never_allows_a_destructive_call_the_team_gives_to_people(self, ci_bot, alice, carol):
        team = ci_bot.agent.team
        services.rule_create(rule="Bash(rm:*)", behavior="allow", source="localSettings", team=team)
        assert submit(ci_bot.agent).decision.behavior == "allow"  # without the risk class

        services.team_settings_update(team=team, destructive_approvals=2)
        request = submit(ci_bot.agent).request
        assert request.state == RequestState.PENDING
        assert request.evaluation["quorum"]["covered_by"] == ["destructive"]
        assert request.evaluation["reserved"] is True
        approve(request, alice)
        final = approve(request, carol).decision
        assert final is not None and final.behavior == "allow"

    def test_no_mode_webhook_or_deadline_allows_it(self, registered_agent, default_team):
        from relay.race import submit_offer

        yolo = registered_agent("yolo", "bypassPermissions")
        assert submit(yolo.agent, permission_mode="bypassPermissions").decision.behavior == "allow"
        services.team_settings_update(team=default_team, destructive_approvals=1)
        request = submit(yolo.agent, permission_mode="bypassPermissions").request
        assert request.state == RequestState.PENDING
        offer = services.Answer(behavior="allow", surface="webhook", decided_by="webhook approver", reason_type="hook")
        assert submit_offer(request, offer) is None
        expired = services.request_expire(request=request).decision
        assert expired is not None and expired.behavior == "deny" and expired.reason_type == "timeout"

    def test_a_headless_session_is_denied_rather_than_allowed(self, ci_bot):
        services.team_settings_update(team=ci_bot.agent.team, destructive_approvals=2)
        services.rule_create(rule="Bash(rm:*)", behavior="allow", source="localSettings", team=ci_bot.agent.team)
        result = submit(ci_bot.agent, context="headless")
        assert result.decision.behavior == "deny"
        assert "needs 2 approvals from people" in result.decision.message

    def test_a_headless_permission_request_webhook_allows_neither_a_quorum_rule_nor_a_protected_path(
        self, ci_bot, default_team
    ):
        """In a headless session a PermissionRequest webhook may answer an ask; not one only people may answer."""
        from relay.webhooks import webhook_create
        from tests.relay.fake_webhook import fake_webhook

        allow = {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
        write_git = {"tool_input": {"command": "echo x > .git/config"}, "context": "headless"}
        with fake_webhook(lambda body: (200, allow, 0)) as hook:
            webhook_create(
                team=default_team, name="ci-policy", url=hook.url, event="PermissionRequest", secret="s" * 24
            )
            services.rule_create(rule="Bash", behavior="allow", source="localSettings", team=default_team)
            # Without a quorum or risk class the webhook answers both asks (as in Claude Code).
            assert submit(ci_bot.agent, context="headless").decision.behavior == "allow"
            assert submit(ci_bot.agent, **write_git).decision.behavior == "allow"

            quorum_rule(default_team)
            services.team_settings_update(team=default_team, protected_path_approvals=1)
            for call in ({"context": "headless"}, write_git):
                denied = submit(ci_bot.agent, **call).decision
                assert denied.behavior == "deny", call
                assert "from people" in denied.message


class TeamQuorumTests:
    def test_the_team_setting_applies_to_every_ask_and_a_rule_may_ask_for_more(self, ci_bot, alice, carol):
        services.team_settings_update(team=ci_bot.agent.team, approvals_required=2)
        request = submit(ci_bot.agent, tool_input={"command": "npm publish"}).request
        assert request.evaluation["quorum"]["required"] == 2
        assert request.evaluation["quorum"]["covered_by"] == ["team"]


class TeamSettingsApiTests:
    def test_a_team_admin_changes_the_settings_and_an_approver_may_only_read_them(self, default_team, alice):
        from tests.approvals.conftest import person_api

        admin = _person("ada", default_team, "admin")
        url = "/api/v1/teams/default/settings"
        assert person_api(alice).get(url).json()["approvals_required"] == 1
        assert person_api(alice).call("patch", url, {"approvals_required": 2}).status_code == 403
        changed = person_api(admin).call("patch", url, {"approvals_required": 2, "remind_after": 60})
        assert changed.status_code == 200, changed.content
        assert (changed.json()["approvals_required"], changed.json()["remind_after"]) == (2, 60)
        outside = person_api(admin).call("patch", url, {"escalate_after": 400})  # past the 300 s default deadline
        assert outside.status_code == 400 and "inside the deadline" in outside.content.decode()
        group = person_api(admin).call("put", "/api/v1/teams/default/groups/leads", {"members": ["alice"]})
        assert group.json()["groups"] == {"leads": ["alice"]}

    def test_a_quorum_belongs_to_ask_rules(self, default_team, alice):
        from tests.approvals.conftest import person_api

        api = person_api(alice)
        bad = api.post("/api/v1/rules", {"rule": "Bash(ls)", "behavior": "allow", "approvals_required": 2})
        assert bad.status_code == 400 and "ask rules only" in bad.content.decode()
        good = api.post("/api/v1/rules", {"rule": "Bash(rm:*)", "behavior": "ask", "approvals_required": 2})
        assert (good.status_code, good.json()["approvals_required"]) == (201, 2)


class TeamSettingsPageTests:
    def test_a_team_admin_sets_the_ladder_and_groups_on_the_page(self, client, default_team, alice):
        admin = _person("ada", default_team, "admin")
        url = "/teams/default/settings/"
        client.force_login(alice)
        assert client.get(url).status_code == 403
        client.force_login(admin)
        assert client.get(url).status_code == 200
        form = {"approvals_required": "2", "destructive_approvals": "0", "protected_path_approvals": "0"}
        form |= {"remind_after": "60", "escalate_after": "120", "on_call_group": "on_call", "groups": "leads: alice"}
        assert client.post(url, form).status_code == 302
        from approvals import selectors

        saved = selectors.team_settings(default_team.pk)
        assert (saved.approvals_required, saved.remind_after, saved.escalate_after) == (2, 60, 120)
        assert selectors.team_groups(default_team.pk) == {"leads": ["alice"]}
        refused = client.post(url, {**form, "escalate_after": "30"})  # before the reminder
        assert refused.status_code == 400 and "after remind_after" in refused.content.decode()
