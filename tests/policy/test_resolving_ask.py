"""Resolving an ask: dontAsk, auto (fast path, allowlist, classifier), headless, plan."""

from __future__ import annotations

from typing import Any

from policy import decide
from tests.policy.calls import request


def _make(**extra: Any) -> Any:
    return decide(request("Bash", {"command": "make build"}, **extra))


class ResolvingAskTests:
    def test_it_leaves_an_interactive_ask_to_the_race(self) -> None:
        decision = _make()
        assert decision.behavior == "ask"
        assert decision.trace[-1] == {"layer": "resolveAsk", "result": "ask", "by": "interactive"}

    def test_it_leaves_a_coordinator_ask_to_the_queue(self) -> None:
        assert _make(context="coordinator").trace[-1]["by"] == "coordinator"

    def test_it_denies_in_headless_context_without_hooks(self) -> None:
        decision = _make(context="headless")
        assert decision.behavior == "deny"
        assert decision.reason["type"] == "headless"
        assert "headless" in decision.message

    def test_it_lets_a_permission_request_hook_allow_in_headless(self) -> None:
        decision = _make(
            context="headless",
            permission_request_hooks=[{"behavior": "allow", "updatedInput": {"command": "make test"}}],
        )
        assert decision.behavior == "allow"
        assert decision.reason["type"] == "hook"
        assert decision.updated_input == {"command": "make test"}

    def test_it_accepts_the_wrapped_permission_request_shape(self) -> None:
        hook = {
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": {"behavior": "deny", "message": "nope"},
            }
        }
        decision = _make(context="headless", permission_request_hooks=[hook])
        assert (decision.behavior, decision.message) == ("deny", "nope")

    def test_it_lets_any_permission_request_deny_win(self) -> None:
        decision = _make(
            context="headless",
            permission_request_hooks=[{"behavior": "allow"}, {"behavior": "deny", "message": "stop"}],
        )
        assert decision.behavior == "deny"

    def test_it_never_lets_a_permission_request_hook_beat_a_deny_rule(self) -> None:
        decision = decide(
            request("Bash", {"command": "rm x"}, context="headless", permission_request_hooks=[{"behavior": "allow"}])
        )
        assert decision.reason["type"] == "rule"

    def test_it_uses_the_given_classifier_verdict_in_auto_mode(self) -> None:
        verdict = {"name": "llm", "behavior": "allow", "reason": "build is fine"}
        decision = _make(mode="auto", classifier_verdict=verdict)
        assert decision.behavior == "allow"
        assert decision.reason == {
            "type": "classifier",
            "classifier": "llm",
            "verdict": "allow",
            "detail": "build is fine",
        }

    def test_it_denies_on_a_classifier_deny_in_auto_mode(self) -> None:
        verdict = {"name": "llm", "behavior": "deny", "reason": "exfiltration"}
        decision = _make(mode="auto", classifier_verdict=verdict)
        assert decision.behavior == "deny"
        assert "exfiltration" in decision.message

    def test_it_keeps_asking_when_the_classifier_has_no_opinion(self) -> None:
        decision = _make(mode="auto", classifier_verdict={"name": "llm", "behavior": None})
        assert decision.behavior == "ask"
        assert ("resolveAsk", "noOpinion") in [(s["layer"], s["result"]) for s in decision.trace]

    def test_it_ignores_the_classifier_outside_auto_mode(self) -> None:
        verdict = {"name": "llm", "behavior": "allow", "reason": ""}
        assert _make(classifier_verdict=verdict).behavior == "ask"

    def test_it_never_lets_the_classifier_beat_a_deny_rule(self) -> None:
        verdict = {"name": "llm", "behavior": "allow", "reason": ""}
        decision = decide(request("Bash", {"command": "rm x"}, mode="auto", classifier_verdict=verdict))
        assert decision.behavior == "deny"

    def test_it_applies_dont_ask_before_headless(self) -> None:
        decision = _make(mode="dontAsk", context="headless", permission_request_hooks=[{"behavior": "allow"}])
        assert decision.reason["type"] == "mode"

    def test_it_resolves_auto_then_headless(self) -> None:
        decision = _make(mode="auto", context="headless", classifier_verdict={"name": "llm", "behavior": None})
        assert decision.reason["type"] == "headless"

    def test_it_treats_plan_entered_from_bypass_as_bypass_for_commands(self) -> None:
        assert _make(mode="plan", plan_from_bypass=True).reason["type"] == "mode"
        assert _make(mode="plan").behavior == "ask"

    def test_it_asks_for_edits_in_plan_mode_even_with_an_allow_rule(self) -> None:
        doc = request("Write", {"file_path": "src/x.py", "content": ""}, mode="plan")
        decision = decide(doc)
        assert (decision.behavior, decision.reason) == (
            "ask",
            {"type": "mode", "mode": "plan", "detail": "edits ask while planning"},
        )
