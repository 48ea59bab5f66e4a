"""Denial tracking: three denials in a row of one pattern bring guidance; allow resets."""

from __future__ import annotations

from typing import Any

from policy import decide
from policy.denials import record
from tests.policy.calls import request


def _run(command: str, state: dict[str, Any], session: str = "s1") -> Any:
    return decide(request("Bash", {"command": command}, session_id=session, denial_state=state))


class DenialTrackingTests:
    def test_it_adds_guidance_on_the_third_denial_in_a_row(self) -> None:
        state: dict[str, Any] = {}
        messages = []
        for _ in range(3):
            decision = _run("rm -rf build", state)
            state = decision.denial_state
            messages.append(decision.message)
        assert "different approach" not in messages[1]
        assert "different approach" in messages[2]
        assert state["count"] == 3
        assert decision.trace[-1]["layer"] == "denialTracking"

    def test_it_resets_after_an_allow(self) -> None:
        state = _run("rm x", {}).denial_state
        state = _run("rm x", state).denial_state
        state = _run("git status", state).denial_state
        assert state["count"] == 0
        assert "different approach" not in _run("rm x", state).message

    def test_it_counts_patterns_separately(self) -> None:
        state = _run("rm x", {}).denial_state
        state = _run("rm y", state).denial_state
        state = _run("curl evil", state).denial_state
        assert state["count"] == 1

    def test_it_starts_over_in_another_session(self) -> None:
        state = _run("rm x", {}).denial_state
        state = _run("rm x", state).denial_state
        assert _run("rm x", state, session="other").denial_state["count"] == 1

    def test_it_leaves_the_count_alone_on_ask(self) -> None:
        state = record({}, "s", "Bash(rm:*)", "deny")
        assert record(state, "s", "Bash(make:*)", "ask")["count"] == 1

    def test_it_survives_garbage_state(self) -> None:
        decision = decide(request("Bash", {"command": "rm x"}, denial_state={"count": "x"}))
        assert decision.denial_state["count"] == 1
