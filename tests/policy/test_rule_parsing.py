"""Rule strings: parsing, round-tripping and the errors that say what is wrong."""

from __future__ import annotations

import pytest

from policy import RuleSyntaxError, compile_rules, parse_rule
from policy.rules import compile_rule


class RuleParsingTests:
    @pytest.mark.parametrize(
        ("text", "tool", "content"),
        [
            ("Bash", "Bash", None),
            ("Bash(npm run build)", "Bash", "npm run build"),
            ("Bash(git commit:*)", "Bash", "git commit:*"),
            ("Bash(git *)", "Bash", "git *"),
            ("Read(~/.ssh/**)", "Read", "~/.ssh/**"),
            ("Edit(//etc/**)", "Edit", "//etc/**"),
            ("WebFetch(domain:example.com)", "WebFetch", "domain:example.com"),
            ("mcp__github", "mcp__github", None),
            ("mcp__github__create_issue", "mcp__github__create_issue", None),
            ("Bash(echo (nested))", "Bash", "echo (nested)"),
            (r"Bash(echo \))", "Bash", "echo )"),
            ("Bash()", "Bash", None),
            ("Bash(*)", "Bash", None),
            ("  Bash(ls)  ", "Bash", "ls"),
        ],
    )
    def test_it_parses_tool_and_content(self, text: str, tool: str, content: str | None) -> None:
        rule = parse_rule(text)
        assert (rule.tool_name, rule.content) == (tool, content)

    @pytest.mark.parametrize(
        "text",
        [
            "Bash",
            "Bash(npm run build)",
            "Bash(git commit:*)",
            "Read(~/.ssh/**)",
            "Bash(echo (nested))",
            r"Bash(echo \))",
            "mcp__s__t",
            "WebFetch(domain:a.b)",
        ],
    )
    def test_it_round_trips_through_str(self, text: str) -> None:
        rule = parse_rule(text)
        assert parse_rule(str(rule)) == rule

    @pytest.mark.parametrize(
        ("text", "fragment"),
        [
            ("Bash(git *", "Bash(git *: unbalanced parenthesis"),
            ("Bash(git *))", "unbalanced parenthesis"),
            ("Bash)", "unbalanced parenthesis"),
            ("(ls)", "missing tool name"),
            ("Ba sh(ls)", "invalid tool name"),
            ("Bash(ls) extra", "unbalanced parenthesis"),
            ("", "empty rule"),
        ],
    )
    def test_it_rejects_bad_syntax_with_a_precise_message(self, text: str, fragment: str) -> None:
        with pytest.raises(RuleSyntaxError, match=fragment.replace("(", r"\(").replace("*", r"\*")):
            parse_rule(text)

    def test_it_rejects_non_strings(self) -> None:
        with pytest.raises(RuleSyntaxError, match="must be a string"):
            parse_rule(42)

    def test_it_is_a_value_error(self) -> None:
        assert issubclass(RuleSyntaxError, ValueError)


class RuleCompileErrorTests:
    @pytest.mark.parametrize(
        ("rule", "behavior", "source", "fragment"),
        [
            ("Bash(cat:*.env*)", "deny", "userSettings", "only allowed at the end"),
            ("WebFetch(http://*)", "deny", "userSettings", "domain:HOST"),
            ("WebFetch(domain:)", "deny", "userSettings", "not a host name"),
            ("Bash(ls)", "maybe", "userSettings", "behavior must be allow, deny or ask"),
            ("Bash(ls)", "allow", "nowhere", "unknown source"),
            ("mcp__server__tool(x)", "allow", "userSettings", "MCP rules take no"),
            ("Bash(:*)", "allow", "userSettings", "empty command prefix"),
        ],
    )
    def test_it_explains_what_is_wrong(self, rule: str, behavior: str, source: str, fragment: str) -> None:
        with pytest.raises(RuleSyntaxError, match=fragment):
            compile_rule(rule, behavior, source)

    def test_it_rejects_a_bad_expiry(self) -> None:
        with pytest.raises(RuleSyntaxError, match="ISO 8601"):
            compile_rule("Bash(ls)", "allow", "session", "tomorrow")

    def test_it_rejects_a_bare_string_as_the_rule_list(self) -> None:
        with pytest.raises(RuleSyntaxError, match="list"):
            compile_rules("Bash(ls)")

    def test_it_compiles_settings_documents_and_items_together(self) -> None:
        compiled = compile_rules(
            [
                {"rule": "Bash(ls)", "behavior": "allow", "source": "session"},
                {"source": "policySettings", "permissions": {"deny": ["Bash(rm:*)"], "ask": ["Read"]}},
            ]
        )
        assert sorted(r.text for r in compiled.rules) == ["Bash(ls)", "Bash(rm:*)", "Read"]
        assert {r.source for r in compiled.rules} == {"session", "policySettings"}

    def test_it_maps_aliases_to_the_canonical_tool(self) -> None:
        compiled = compile_rules([{"rule": "Agent(Explore)", "behavior": "allow", "source": "session"}])
        assert compiled.rules[0].text == "Task(Explore)"
