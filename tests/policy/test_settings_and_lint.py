"""Claude Code settings files in and out, and rule linting."""

from __future__ import annotations

import pytest

from policy import RuleSyntaxError
from policy.lint import lint_rules
from policy.settings import export_settings, load_settings

SETTINGS = {
    "permissions": {
        "allow": ["Bash(npm run test:*)", "Read(~/notes/**)"],
        "deny": ["Bash(rm:*)"],
        "ask": ["Bash(git push:*)"],
        "defaultMode": "acceptEdits",
        "additionalDirectories": ["../shared"],
    },
    "hooks": {},
}


class SettingsTests:
    def test_it_loads_rules_with_their_source(self) -> None:
        loaded = load_settings(SETTINGS, "localSettings")
        assert {(r.text, r.behavior, r.source) for r in loaded.rules.rules} == {
            ("Bash(npm run test:*)", "allow", "localSettings"),
            ("Read(~/notes/**)", "allow", "localSettings"),
            ("Bash(rm:*)", "deny", "localSettings"),
            ("Bash(git push:*)", "ask", "localSettings"),
        }
        assert loaded.default_mode == "acceptEdits"
        assert loaded.additional_directories == ["../shared"]

    def test_it_round_trips_through_export(self) -> None:
        loaded = load_settings(SETTINGS, "projectSettings")
        exported = export_settings(
            loaded.rules.rules, default_mode=loaded.default_mode, additional_directories=loaded.additional_directories
        )
        assert exported == {"permissions": {k: v for k, v in SETTINGS["permissions"].items()}}

    def test_it_treats_a_file_without_permissions_as_empty(self) -> None:
        assert len(load_settings({"hooks": {}}, "userSettings").rules) == 0

    @pytest.mark.parametrize(
        ("doc", "fragment"),
        [
            ({"permissions": {"allow": "Bash"}}, "must be a list"),
            ({"permissions": {"defaultMode": "ask"}}, "defaultMode 'ask'"),
            ({"permissions": {"allow": ["Bash(ls"]}}, "unbalanced"),
            ({"permissions": []}, "must be an object"),
        ],
    )
    def test_it_rejects_invalid_files(self, doc: dict[str, object], fragment: str) -> None:
        with pytest.raises(RuleSyntaxError, match=fragment):
            load_settings(doc, "userSettings")


class LintTests:
    def _kinds(self, allow: list[str], deny: list[str] = [], ask: list[str] = []) -> set[tuple[str, str]]:  # noqa: B006
        doc = {"source": "projectSettings", "permissions": {"allow": allow, "deny": deny, "ask": ask}}
        return {(f.kind, f.rule) for f in lint_rules([doc])}

    def test_it_reports_invalid_rules(self) -> None:
        assert ("invalid", "Bash(git *") in self._kinds(["Bash(git *"])

    def test_it_reports_unknown_tools(self) -> None:
        assert ("unknownTool", "Bsh(ls)") in self._kinds(["Bsh(ls)"])

    def test_it_reports_specifiers_that_never_match(self) -> None:
        assert ("neverMatches", "TodoWrite(x)") in self._kinds(["TodoWrite(x)"])

    def test_it_reports_duplicates(self) -> None:
        assert ("duplicate", "Bash(ls)") in self._kinds(["Bash(ls)", "Bash(ls)"])

    def test_it_reports_an_allow_shadowed_by_a_deny(self) -> None:
        assert ("shadowed", "Bash(git push:*)") in self._kinds(["Bash(git push:*)"], deny=["Bash(git:*)"])

    def test_it_reports_an_allow_shadowed_by_a_whole_tool_ask(self) -> None:
        assert ("shadowed", "Read(src/**)") in self._kinds(["Read(src/**)"], ask=["Read"])

    def test_it_does_not_report_independent_rules(self) -> None:
        assert self._kinds(["Bash(git status:*)"], deny=["Bash(git push:*)"]) == set()

    def test_it_reports_expired_rules(self) -> None:
        findings = lint_rules(
            [{"rule": "Bash(ls)", "behavior": "allow", "source": "session", "expires_at": "2000-01-01T00:00:00Z"}]
        )
        assert [f.kind for f in findings] == ["expired"]
