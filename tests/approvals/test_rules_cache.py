"""Compiled rules are cached per team, and every rule change reaches the very next call."""

from __future__ import annotations

from typing import Any

import pytest

from approvals import selectors, services
from approvals.models import Rule

GIT_STATUS = {"tool_name": "Bash", "tool_input": {"command": "git status"}, "session_id": "s1", "cwd": "/srv/app"}


def _behavior(agent: Any, tool_use_id: str) -> str:
    result = services.request_submit(agent=agent, call={**GIT_STATUS, "tool_use_id": tool_use_id})
    assert result.decision is not None, "expected the engine to decide"
    return result.decision.behavior


@pytest.mark.django_db
class RulesCacheTests:
    def test_it_applies_a_deny_rule_written_behind_the_services_back(self, ci_bot: Any, default_team: Any) -> None:
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=default_team)
        assert _behavior(ci_bot.agent, "toolu_1") == "allow"  # now cached
        # As the admin, a shell or another process would: no service call at all.
        Rule.objects.create(rule="Bash(git status)", behavior="deny", source="policySettings", team=default_team)
        assert _behavior(ci_bot.agent, "toolu_2") == "deny"

    def test_it_follows_queryset_updates_and_deletes(self, ci_bot: Any, default_team: Any) -> None:
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=default_team)
        assert _behavior(ci_bot.agent, "toolu_1") == "allow"
        Rule.objects.filter(team=default_team).update(behavior="deny")
        assert _behavior(ci_bot.agent, "toolu_2") == "deny"
        Rule.objects.filter(team=default_team).delete()
        result = services.request_submit(agent=ci_bot.agent, call={**GIT_STATUS, "tool_use_id": "toolu_3"})
        assert result.decision is None or result.decision.behavior != "deny"

    def test_a_rule_change_gives_the_team_a_new_version(self, default_team: Any, other_team: Any) -> None:
        before, other_before = selectors.rules_version(default_team.pk), selectors.rules_version(other_team.pk)
        rule = services.rule_create(rule="Read", behavior="allow", source="userSettings", team=default_team)
        created = selectors.rules_version(default_team.pk)
        services.rule_update(rule=rule, behavior="deny")
        updated = selectors.rules_version(default_team.pk)
        services.rule_delete(rule=rule)
        deleted = selectors.rules_version(default_team.pk)
        assert len({before, created, updated, deleted}) == 4
        assert selectors.rules_version(other_team.pk) == other_before

    def test_it_scopes_cached_rules_to_the_agent_session_and_project(
        self, ci_bot: Any, other_bot: Any, default_team: Any, registered_agent: Any
    ) -> None:
        second = registered_agent("second-bot", "default")
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=default_team)
        services.rule_create(
            rule="Bash(git status)",
            behavior="deny",
            source="session",
            team=default_team,
            scope="session",
            session_id="s1",
            agent=ci_bot.agent,
        )
        services.rule_create(
            rule="Bash(git status)",
            behavior="deny",
            source="localSettings",
            team=default_team,
            scope="project",
            project_path="/srv/other",
        )
        assert _behavior(ci_bot.agent, "toolu_1") == "deny"  # its own session rule
        assert _behavior(second.agent, "toolu_2") == "allow"  # another agent, same session id
        other_session = services.request_submit(
            agent=ci_bot.agent, call={**GIT_STATUS, "session_id": "s2", "tool_use_id": "toolu_3"}
        )
        assert other_session.decision is not None and other_session.decision.behavior == "allow"
        in_other_project = services.request_submit(
            agent=second.agent, call={**GIT_STATUS, "cwd": "/srv/other/src", "tool_use_id": "toolu_4"}
        )
        assert in_other_project.decision is not None and in_other_project.decision.behavior == "deny"
