"""The LLM classifier racing people never answers an ask reserved for a person.

Runs the real racer against requests the real service stored, with the classifier
talking to a fake Messages API that always allows: for reserved asks (a safety check,
an ask rule) it is never even consulted; an ordinary ask still gets its offer.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from approvals import services
from relay.classifiers import ClassifierRacer, LLMClassifier, ask_is_reserved
from tests.fakes.anthropic import fake_anthropic
from tests.relay.wsclient import ask_call

pytestmark = pytest.mark.django_db(transaction=True)

ALLOW = lambda body: json.dumps({"decision": "allow", "reason": "looks fine"})  # noqa: E731
RESERVED_CALLS = [
    {"tool_name": "Write", "tool_input": {"file_path": ".git/hooks/pre-commit", "content": "x"}},
    {"tool_name": "Bash", "tool_input": {"command": "echo x > .git/hooks/pre-commit"}},
    {"tool_name": "Bash", "tool_input": {"command": "ls src/cfg > .git/config"}},
    {"tool_name": "WebFetch", "tool_input": {"url": "http://2130706433/", "prompt": "x"}},
]


class ClassifierReservationTests:
    @pytest.mark.parametrize("call", RESERVED_CALLS, ids=lambda c: c["tool_name"] + ":" + str(c["tool_input"])[:30])
    def test_the_racer_never_offers_on_a_reserved_ask(self, ci_bot: Any, call: dict[str, Any]) -> None:
        submitted = services.request_submit(
            agent=ci_bot.agent, call={**call, "session_id": "s1", "cwd": "/tmp/proj", "tool_use_id": "t1"}
        )
        assert submitted.decision is None  # still waiting for a person
        with fake_anthropic(ALLOW) as api:
            racer = ClassifierRacer(LLMClassifier(api_key="sk-test", base_url=api.url))
            assert racer.offers(submitted.request, still_pending=lambda: True) == []
        assert api.requests == []
        assert ask_is_reserved(submitted.request.evaluation)

    def test_the_racer_still_offers_on_an_ordinary_ask(self, ci_bot: Any) -> None:
        submitted = services.request_submit(agent=ci_bot.agent, call=ask_call(tool_use_id="t2"))
        assert submitted.decision is None
        with fake_anthropic(ALLOW) as api:
            racer = ClassifierRacer(LLMClassifier(api_key="sk-test", base_url=api.url))
            offers = racer.offers(submitted.request, still_pending=lambda: True)
        assert [offer.behavior for offer in offers] == ["allow"]
        assert len(api.requests) == 1

    @pytest.mark.parametrize(
        ("evaluation", "reserved"),
        [
            ({"reason": {"type": "safetyCheck"}}, True),
            ({"reason": {"type": "rule", "behavior": "ask"}}, True),
            ({"reason": {"type": "hook"}}, True),
            ({"reason": {"type": "other"}}, False),
            ({"reason": {"type": "workingDirectory"}}, False),
            ({"reserved": False, "reason": {"type": "safetyCheck"}}, False),
        ],
    )
    def test_it_reads_rows_stored_before_the_flag(self, evaluation: dict[str, Any], reserved: bool) -> None:
        assert ask_is_reserved(evaluation) is reserved
