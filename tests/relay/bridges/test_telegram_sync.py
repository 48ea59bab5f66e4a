"""Telegram: every message follows the request's fate, whichever surface ended it."""

from __future__ import annotations

import pytest

from tests.relay.bridges.conftest import ask

pytestmark = pytest.mark.django_db(transaction=True)


class TelegramSyncTests:
    def test_it_edits_the_message_when_the_web_decides_first(self, fake_tg, telegram_bridge, ci_bot, alice):
        from approvals.services import Answer
        from relay import race

        request = ask(ci_bot.agent)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        assert race.answer(request.pk, Answer(behavior="allow", surface="web", user=alice)).won
        fake_tg.wait_for(lambda: "✅ Allowed by alice via web." in card.text)
        assert card.reply_markup is None

    def test_it_edits_the_message_when_the_agent_cancels(self, fake_tg, telegram_bridge, ci_bot):
        from approvals import services

        request = ask(ci_bot.agent)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        services.request_cancel(request=request, reason="answered locally")
        fake_tg.wait_for(lambda: "↩️ Cancelled by agent ci-bot via local (answered locally)." in card.text)

    def test_it_edits_the_message_when_the_request_expires(self, fake_tg, telegram_bridge, ci_bot):
        from approvals import services

        request = ask(ci_bot.agent)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        services.request_expire(request=request)
        fake_tg.wait_for(lambda: "⌛ Expired" in card.text)

    def test_it_does_not_post_buttons_for_a_request_decided_while_queued(self, fake_tg, telegram_bridge, ci_bot, alice):
        from django.db import transaction

        from approvals.services import Answer
        from relay import race

        # Decided in the same breath as it was asked: the post job finds it finished.
        with transaction.atomic():
            request = ask(ci_bot.agent)
        assert race.answer(request.pk, Answer(behavior="deny", surface="web", user=alice)).won
        assert telegram_bridge.queue.wait_idle(10)
        assert fake_tg.cards() == []
