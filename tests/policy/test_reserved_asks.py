"""A classifier decides only what no rule and no safety check reserved for a person.

In auto mode, each reserved ask (an ask rule, a protected write through Write or the
shell, a hook's ask, a word that could match a deny rule, a private WebFetch address)
stays an ask however firmly the classifier allows, and the decision says so
(``reserved``); an unreserved ask is still the classifier's to answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy import decide
from tests.policy.calls import request

ALLOWING = {"name": "permissive", "behavior": "allow", "reason": "looks fine"}
RESERVED: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("ask rule", "Bash", {"command": "git push origin main"}, {}),
    ("ask rule on a path", "Edit", {"file_path": "src/secrets/k.py", "old_string": "", "new_string": "x"}, {}),
    ("protected Write", "Write", {"file_path": ".git/hooks/pre-commit", "content": "x"}, {}),
    ("protected shell write", "Bash", {"command": "echo x > .git/hooks/pre-commit"}, {}),
    ("protected tee", "Bash", {"command": "ls | tee .claude/settings.json"}, {}),
    ("hook ask", "Bash", {"command": "make"}, {"pre_tool_use_hooks": [{"permissionDecision": "ask"}]}),
    ("unresolved word", "Bash", {"command": "cat ~/.ss?/id_rsa"}, {}),
    ("private address", "WebFetch", {"url": "http://0x7f000001/", "prompt": "x"}, {}),
]


class ReservedAskTests:
    @pytest.mark.parametrize(("label", "tool", "tool_input", "extra"), RESERVED, ids=[r[0] for r in RESERVED])
    def test_the_classifier_never_answers_a_reserved_ask(
        self, label: str, tool: str, tool_input: dict[str, Any], extra: dict[str, Any]
    ) -> None:
        decision = decide(request(tool, tool_input, mode="auto", classifier_verdict=ALLOWING, **extra))
        assert decision.behavior == "ask", decision.reason
        assert decision.reserved is True
        assert decision.to_dict()["reserved"] is True
        assert not any(step.get("by") == "classifier" for step in decision.trace)

    def test_the_classifier_still_answers_what_nothing_reserved(self) -> None:
        decision = decide(request("Bash", {"command": "make"}, mode="auto", classifier_verdict=ALLOWING))
        assert decision.behavior == "allow"
        assert decision.reason["type"] == "classifier"
        assert decision.reserved is False

    def test_an_unreserved_ask_is_not_marked_reserved(self) -> None:
        decision = decide(request("Bash", {"command": "make"}))
        assert decision.behavior == "ask"
        assert decision.reserved is False
