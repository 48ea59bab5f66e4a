"""Classifiers: the deterministic one in auto mode, and the LLM one through a fake Messages API."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.test import override_settings

from approvals import services
from relay.classifiers import LLMClassifier, ReadOnlyClassifier
from tests.fakes.anthropic import fake_anthropic
from tests.live import live_server
from tests.relay.wsclient import agent_connect, ask_call, of_type, receive_until, send

pytestmark = pytest.mark.django_db(transaction=True)


def _verdict(decision: str, reason: str = "looks fine") -> Any:
    return lambda body: json.dumps({"decision": decision, "reason": reason})


class ReadOnlyClassifierTests:
    def test_it_allows_read_only_commands_and_has_no_opinion_on_others(self) -> None:
        classifier = ReadOnlyClassifier()
        assert (
            classifier.classify({"tool_name": "Bash", "tool_input": {"command": "ls -la"}, "cwd": "/tmp/proj"})[
                "behavior"
            ]
            == "allow"
        )
        assert (
            classifier.classify({"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}, "cwd": "/tmp/proj"})[
                "behavior"
            ]
            is None
        )

    def test_auto_mode_uses_it_before_asking_anyone(self, registered_agent: Any) -> None:
        auto_bot = registered_agent("auto-bot", "auto")
        # Not in the read-only set Claude Code runs unasked in every mode, but read-only to the classifier.
        allowed = services.request_submit(agent=auto_bot.agent, call=ask_call("git show HEAD", permission_mode="auto"))
        asked = services.request_submit(
            agent=auto_bot.agent, call=ask_call("rm -rf build", permission_mode="auto", tool_use_id="t2")
        )
        assert allowed.decision is not None and allowed.decision.reason_type == "classifier"
        assert asked.decision is None


class LLMClassifierTests:
    def test_it_sends_the_call_and_reads_the_verdict(self) -> None:
        with fake_anthropic(_verdict("deny", "deletes the repository")) as api:
            verdict = LLMClassifier(api_key="sk-test", base_url=api.url).classify(
                {"tool_name": "Bash", "tool_input": {"command": "rm -rf ."}, "cwd": "/tmp/proj"}
            )
        assert verdict == {"name": "llm", "behavior": "deny", "reason": "deletes the repository"}
        sent = api.headers[0]
        assert sent.get("x-api-key") == "sk-test" or sent.get("authorization") == "Bearer sk-test"
        assert "rm -rf ." in json.dumps(api.requests[0]["messages"])

    @pytest.mark.parametrize("status", [500, 529])
    def test_it_has_no_opinion_when_the_api_fails(self, status: int) -> None:
        with fake_anthropic(_verdict("allow"), status=status) as api:
            verdict = LLMClassifier(api_key="sk-test", base_url=api.url, timeout=5).classify(
                {"tool_name": "Bash", "tool_input": {"command": "make"}}
            )
        assert verdict["behavior"] is None

    def test_it_has_no_opinion_when_the_answer_is_not_understood(self) -> None:
        with fake_anthropic(lambda body: "Sure! I think it's fine.") as api:
            verdict = LLMClassifier(api_key="sk-test", base_url=api.url).classify({"tool_name": "Bash"})
        assert verdict["behavior"] is None

    def test_auto_mode_asks_the_llm_when_the_rules_classifier_has_no_opinion(self, registered_agent: Any) -> None:
        auto_bot = registered_agent("auto-bot", "auto")
        with (
            fake_anthropic(_verdict("deny", "destructive")) as api,
            override_settings(GATEHOUSE_LLM_CLASSIFIER=True, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=api.url),
        ):
            result = services.request_submit(agent=auto_bot.agent, call=ask_call(permission_mode="auto"))
        assert result.decision is not None
        assert result.decision.behavior == "deny"
        assert result.decision.reason_type == "classifier"
        assert result.decision.reason.get("classifier") == "llm"

    def test_it_races_people_for_an_interactive_ask(self, ci_bot: Any) -> None:
        with (
            fake_anthropic(_verdict("allow", "a build directory")) as api,
            live_server(GATEHOUSE_LLM_CLASSIFIER="1", ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=api.url) as srv,
        ):

            async def scenario() -> dict[str, Any]:
                async with agent_connect(srv, ci_bot.token) as ws:
                    await send(ws, {"type": "permission_request", "ref": "r", "request": ask_call()})
                    return await receive_until(ws, of_type("decision"))

            frame = asyncio.run(scenario())
        assert frame["decision"]["behavior"] == "allow"
        assert frame["decision"]["surface"] == "classifier"
        assert frame["decision"]["decided_by"] == "classifier llm"
        assert frame["decision"]["reason"]["type"] == "classifier"
