"""One sentence says who decided what; every surface shows that sentence with its own markup."""

from __future__ import annotations

from typing import Any

import pytest

from approvals import services
from relay.bridges.base import already_decided_text, outcome_text

pytestmark = pytest.mark.django_db


def ask(agent: Any) -> Any:
    call = {"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "session_id": "s1", "cwd": "/tmp/proj"}
    return services.request_submit(agent=agent, call=call).request


class OutcomeSentenceTests:
    def test_it_names_the_winner_verb_and_surface(self, alice: Any, ci_bot: Any) -> None:
        request = ask(ci_bot.agent)
        result = services.request_decide(request.pk, services.Answer(behavior="deny", surface="telegram", user=alice))
        request.refresh_from_db()
        assert request.outcome_sentence(result.decision) == "denied by alice via telegram"
        assert request.outcome_sentence(result.decision, late=True) == "already decided by alice via telegram (denied)"

    def test_every_surface_shows_the_same_sentence(self, alice: Any, ci_bot: Any) -> None:
        request = ask(ci_bot.agent)
        result = services.request_decide(request.pk, services.Answer(behavior="allow", surface="web", user=alice))
        request.refresh_from_db()
        assert result.decision is not None
        sentence = request.outcome_sentence(result.decision, late=True)
        assert already_decided_text(request, result.decision) == "Already decided by alice via web (allowed)."
        assert outcome_text(request, result.decision) == "✅ Allowed by alice via web."
        assert sentence.startswith("already decided by alice via web")

    def test_it_says_expired_and_cancelled_apart_from_decisions(self, ci_bot: Any) -> None:
        expired, cancelled = ask(ci_bot.agent), ask(ci_bot.agent)
        timeout = services.request_expire(request=expired).decision
        withdrawn = services.request_cancel(request=cancelled, reason="answered locally").decision
        expired.refresh_from_db()
        cancelled.refresh_from_db()
        assert expired.outcome_sentence(timeout, late=True) == "already expired: nobody answered before the deadline"
        assert cancelled.outcome_sentence(withdrawn) == "cancelled by agent ci-bot via local (answered locally)"

    def test_it_names_the_claim_holder_before_any_decision(self, ci_bot: Any) -> None:
        request = ask(ci_bot.agent)
        assert request.outcome_sentence(None, holder="bob", late=True) == "already being decided by bob"
        assert request.outcome_sentence(None) == "pending"
