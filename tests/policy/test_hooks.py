"""PreToolUse hook results: deny ends it, allow is still checked, ask forces a prompt."""

from __future__ import annotations

from typing import Any

import pytest

from policy import decide
from tests.policy.calls import request


def _hook(decision: str | None, reason: str = "", updated: dict[str, Any] | None = None) -> dict[str, Any]:
    output: dict[str, Any] = {"hookEventName": "PreToolUse"}
    if decision is not None:
        output["permissionDecision"] = decision
    if reason:
        output["permissionDecisionReason"] = reason
    if updated is not None:
        output["updatedInput"] = updated
    return {"hookSpecificOutput": output, "hook": "guard.sh"}


def _bash(command: str, hooks: list[Any], **extra: Any) -> Any:
    return decide(request("Bash", {"command": command}, pre_tool_use_hooks=hooks, **extra))


class HookTests:
    def test_it_denies_when_a_hook_denies(self) -> None:
        decision = _bash("git status", [_hook("deny", "not today")])
        assert decision.behavior == "deny"
        assert decision.reason == {"type": "hook", "hook": "guard.sh", "detail": "deny"}
        assert decision.message == "not today"

    @pytest.mark.parametrize("mode", ["default", "bypassPermissions", "auto", "dontAsk"])
    def test_it_keeps_a_hook_deny_in_every_mode(self, mode: str) -> None:
        assert _bash("git status", [_hook("deny")], mode=mode).behavior == "deny"

    def test_it_lets_a_deny_rule_override_a_hook_allow(self) -> None:
        decision = _bash("rm -rf build", [_hook("allow")])
        assert decision.behavior == "deny"
        assert decision.reason["rule"] == "Bash(rm:*)"

    def test_it_lets_an_ask_rule_override_a_hook_allow(self) -> None:
        decision = _bash("git push origin main", [_hook("allow")])
        assert decision.behavior == "ask"
        assert decision.reason["rule"] == "Bash(git push:*)"

    def test_it_allows_on_a_hook_allow_when_no_rule_objects(self) -> None:
        decision = _bash("make build", [_hook("allow", "CI may build")])
        assert decision.behavior == "allow"
        assert decision.reason["type"] == "hook"

    def test_it_keeps_the_protected_path_safety_check_after_a_hook_allow(self) -> None:
        doc = request("Write", {"file_path": ".git/config", "content": "x"}, pre_tool_use_hooks=[_hook("allow")])
        decision = decide(doc)
        assert (decision.behavior, decision.reason["type"]) == ("ask", "safetyCheck")

    def test_it_forces_a_prompt_with_the_hook_message_on_ask(self) -> None:
        decision = _bash("git status", [_hook("ask", "Confirm: status during deploy")])
        assert decision.behavior == "ask"
        assert decision.message == "Confirm: status during deploy"
        assert decision.reason["type"] == "hook"

    def test_it_does_not_let_bypass_or_auto_answer_a_hook_ask(self) -> None:
        for mode in ("bypassPermissions", "auto"):
            assert _bash("git status", [_hook("ask")], mode=mode).behavior == "ask"

    def test_it_still_denies_a_hook_ask_by_rule(self) -> None:
        assert _bash("rm x", [_hook("ask")]).reason["rule"] == "Bash(rm:*)"

    def test_it_resolves_a_hook_ask_to_deny_in_dont_ask_mode(self) -> None:
        assert _bash("git status", [_hook("ask")], mode="dontAsk").behavior == "deny"

    def test_it_prefers_deny_over_ask_over_allow_between_hooks(self) -> None:
        decision = _bash("ls", [_hook("allow"), _hook("deny", "no"), _hook("ask")])
        assert decision.behavior == "deny"
        assert _bash("make", [_hook("allow"), _hook("ask", "why?")]).message == "why?"

    def test_it_rewrites_the_input_without_deciding(self) -> None:
        decision = _bash("cat build.log", [_hook(None, updated={"command": "ls build"})])
        assert decision.behavior == "allow"
        assert decision.updated_input == {"command": "ls build"}
        assert decision.tool_input == {"command": "ls build"}

    def test_deny_rules_still_see_the_input_as_sent(self) -> None:
        """A rewrite must not hide the real input: `rm -rf build` stays denied by Bash(rm:*)."""
        decision = _bash("rm -rf build", [_hook(None, updated={"command": "ls build"})])
        assert decision.behavior == "deny"
        assert decision.reason["rule"] == "Bash(rm:*)"

    def test_it_checks_rules_against_the_rewritten_input(self) -> None:
        decision = _bash("ls", [_hook("allow", updated={"command": "rm -rf /"})])
        assert decision.behavior == "deny"
        assert decision.updated_input == {"command": "rm -rf /"}

    def test_it_rejects_a_rewrite_that_breaks_the_schema(self) -> None:
        decision = _bash("ls", [_hook(None, updated={"cmd": "ls"})])
        assert decision.behavior == "deny"
        assert "InputValidationError" in decision.message

    def test_it_ignores_malformed_hook_outputs_with_a_warning(self) -> None:
        decision = _bash("ls", ["garbage", _hook("maybe")])
        assert decision.behavior == "allow"
        assert len(decision.warnings) == 2

    def test_it_accepts_the_bare_hook_specific_output_shape(self) -> None:
        decision = _bash("ls", [{"permissionDecision": "deny", "permissionDecisionReason": "x"}])
        assert decision.behavior == "deny"
        assert decision.reason["hook"] == "PreToolUse[0]"
