"""Deny beats ask beats allow across all sources; the strongest source is reported."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from policy import compile_rules, decide
from policy.rules import SOURCES
from tests.policy.calls import gather

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _call(rules: list[dict[str, Any]], command: str = "git push origin main", **extra: Any) -> Any:
    doc = {
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "cwd": "/srv/p",
        "home": "/home/a",
        "rules": rules,
        **extra,
    }
    return decide(doc, now=NOW)


def _rule(rule: str, behavior: str, source: str, **extra: Any) -> dict[str, Any]:
    return {"rule": rule, "behavior": behavior, "source": source, **extra}


class RulePrecedenceTests:
    @pytest.mark.parametrize("deny_source", SOURCES)
    @pytest.mark.parametrize("allow_source", SOURCES)
    def test_it_lets_a_deny_from_any_source_beat_any_allow(self, deny_source: str, allow_source: str) -> None:
        decision = _call([_rule("Bash(git push:*)", "allow", allow_source), _rule("Bash(git:*)", "deny", deny_source)])
        assert decision.behavior == "deny"
        assert decision.reason["source"] == deny_source

    @pytest.mark.parametrize("source", SOURCES)
    def test_it_lets_an_ask_beat_an_allow_from_a_stronger_source(self, source: str) -> None:
        decision = _call(
            [_rule("Bash(git push:*)", "allow", "policySettings"), _rule("Bash(git push:*)", "ask", source)]
        )
        assert decision.behavior == "ask"
        assert decision.reason == {"type": "rule", "rule": "Bash(git push:*)", "source": source, "behavior": "ask"}

    def test_it_reports_the_strongest_source_among_matching_denies(self) -> None:
        decision = _call(
            [
                _rule("Bash(git push:*)", "deny", "userSettings"),
                _rule("Bash", "deny", "policySettings"),
                _rule("Bash(git *)", "deny", "localSettings"),
            ]
        )
        assert decision.reason["source"] == "policySettings"
        assert decision.reason["rule"] == "Bash"

    def test_it_orders_settings_sources_as_claude_code_does(self) -> None:
        order = [
            SOURCES.index(s)
            for s in ("userSettings", "projectSettings", "localSettings", "flagSettings", "policySettings")
        ]
        assert order == sorted(order)

    def test_it_ignores_expired_rules(self) -> None:
        past = (NOW - timedelta(hours=1)).isoformat()
        decision = _call([_rule("Bash(git push:*)", "deny", "session", expires_at=past)])
        assert decision.behavior == "ask"
        assert ("denyRules", "noMatch") in [(s["layer"], s["result"]) for s in decision.trace]

    def test_it_honours_rules_that_have_not_expired(self) -> None:
        future = (NOW + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
        decision = _call([_rule("Bash(git push:*)", "allow", "session", expires_at=future)])
        assert decision.behavior == "allow"

    def test_it_treats_naive_expiry_as_utc(self) -> None:
        naive = (NOW - timedelta(minutes=1)).replace(tzinfo=None).isoformat()
        decision = _call([_rule("Bash(git push:*)", "allow", "session", expires_at=naive)])
        assert decision.behavior == "ask"

    def test_it_merges_precompiled_rules_with_the_document_rules(self) -> None:
        cached = compile_rules([_rule("Bash(git push:*)", "allow", "projectSettings")])
        doc = {
            "tool_name": "Bash",
            "tool_input": {"command": "git push"},
            "cwd": "/srv/p",
            "rules": [_rule("Bash(git push:*)", "deny", "session")],
        }
        assert decide(doc, rules=cached).behavior == "deny"
        doc["rules"] = []
        assert decide(doc, rules=cached).behavior == "allow"

    def test_it_reports_a_bad_rule_in_the_document_as_a_deny(self) -> None:
        decision = _call([_rule("Bash(git *", "allow", "session")])
        assert decision.behavior == "deny"
        assert decision.reason["type"] == "other"
        assert "unbalanced parenthesis" in decision.message

    def test_it_allows_an_edit_rule_to_cover_write(self) -> None:
        doc = {
            "tool_name": "Write",
            "tool_input": {"file_path": "/srv/p/a.txt", "content": ""},
            "cwd": "/srv/p",
            "rules": [_rule("Edit(*.txt)", "deny", "userSettings")],
        }
        assert decide(doc).reason.get("rule") == "Edit(*.txt)"

    def test_it_resolves_symlinks_before_matching(self, tmp_path: Any) -> None:
        secret = tmp_path / "secret"
        secret.mkdir()
        (secret / "key").write_text("x")
        project = tmp_path / "project"
        project.mkdir()
        (project / "link").symlink_to(secret)
        doc = {
            "tool_name": "Read",
            "tool_input": {"file_path": "link/key"},
            "cwd": str(project),
            "rules": [_rule(f"Read(/{secret}/**)", "deny", "userSettings")],
            "facts": gather("Read", {"file_path": "link/key"}, str(project), [], str(tmp_path)),
        }
        decision = decide(doc)
        assert decision.behavior == "deny"
        assert decision.reason["rule"] == f"Read(/{secret}/**)"
