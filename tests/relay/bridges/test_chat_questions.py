"""AskUserQuestion answered on Telegram and Slack: one button per option.

A call with one single-choice question gets a button per option; anything else is
answered in Gatehouse (tests/approvals/test_questions.py has the card and the API).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.approvals.test_questions import DB, MULTI, QUESTIONS, ask_question
from tests.relay.bridges.conftest import ALICE_SLACK, ALICE_TG, decision_of

pytestmark = pytest.mark.django_db(transaction=True)


class TelegramAnswerTests:
    def test_one_button_per_option_answers_the_question(
        self, fake_tg: Any, telegram_bridge: Any, telegram_poller: Any, ci_bot: Any
    ) -> None:
        request = ask_question(ci_bot.agent)
        card = fake_tg.wait_for(lambda: fake_tg.card_for(DB))
        assert [b["text"] for b in card.buttons] == ["PostgreSQL", "SQLite", "Deny"]
        assert "• SQLite — a file" in card.text
        update_id = fake_tg.press(card, "SQLite", user_id=ALICE_TG, username="alice_tg")
        assert "SQLite: done." in fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}"))
        decision = decision_of(request)
        assert decision.behavior == "allow" and decision.surface == "telegram"
        assert decision.updated_input == {"questions": QUESTIONS, "answers": {DB: "SQLite"}}

    def test_several_questions_are_answered_in_gatehouse(self, fake_tg: Any, telegram_bridge: Any, ci_bot: Any) -> None:
        ask_question(ci_bot.agent, [*QUESTIONS, MULTI])
        card = fake_tg.wait_for(lambda: fake_tg.card_for(DB))
        assert [b["text"] for b in card.buttons] == ["Deny"]
        assert "Open in Gatehouse" in card.text


class SlackAnswerTests:
    def test_one_button_per_option_answers_the_question(self, fake_sl: Any, slack_bridge: Any, ci_bot: Any) -> None:
        from relay.bridges.base import apply_press
        from relay.bridges.slack import parse_press
        from tests.fakes.slack import block_actions

        request = ask_question(ci_bot.agent)
        card = fake_sl.wait_for(lambda: next(iter(fake_sl.cards()), None))
        assert [b["text"]["text"] for b in card.buttons] == ["PostgreSQL", "SQLite", "Deny"]
        assert DB in card.all_text
        press, _channel = parse_press(block_actions(card, "PostgreSQL", user_id=ALICE_SLACK, username="alice"))
        outcome = apply_press(press, slack_bridge.approvers_for)
        assert outcome.applied, outcome.text
        decision = decision_of(request)
        assert decision.surface == "slack"
        assert decision.updated_input == {"questions": QUESTIONS, "answers": {DB: "PostgreSQL"}}
