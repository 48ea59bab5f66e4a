"""Telegram and Slack cards carry no secret from the call: masked in the excerpt, the cwd and the grant."""

from __future__ import annotations

import pytest

from tests.relay.bridges.conftest import ask

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "ghp_" + "Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA9z"
COMMAND = f"curl -H 'Authorization: Bearer {TOKEN}' https://api.github.com/user && echo password=hunter2x"


class ChatMaskingTests:
    def test_a_telegram_card_masks_the_token_and_the_password(self, fake_tg, telegram_bridge, ci_bot):
        ask(ci_bot.agent, COMMAND)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        assert TOKEN[4:] not in card.text
        assert "hunter2x" not in card.text
        assert "api.github.com/user" in card.text
        assert "•••••" in card.text

    def test_a_slack_card_masks_the_token_and_the_password(self, fake_sl, slack_bridge, ci_bot):
        ask(ci_bot.agent, COMMAND)
        card = fake_sl.wait_for(lambda: next(iter(fake_sl.cards()), None))
        text = card.all_text + card.text
        assert TOKEN[4:] not in text
        assert "hunter2x" not in text
        assert "api.github.com/user" in card.all_text

    def test_a_card_with_a_masked_secret_offers_no_allow_and_names_no_grant(self, fake_tg, telegram_bridge, ci_bot):
        ask(ci_bot.agent, f"gh api user --token {TOKEN}")
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        # The person cannot see what would run, so no one-tap Allow and no rule to save.
        assert [b["text"] for b in card.buttons] == ["Deny"]
        assert "save <code>" not in card.text
        assert "secrets masked" in card.text
        assert TOKEN[4:] not in card.text

    def test_the_grant_a_card_names_is_masked_too(self, transactional_db, ci_bot):
        from relay.bridges.base import grant_shown

        request = ask(ci_bot.agent, f"gh api user --token {TOKEN}")
        assert grant_shown(request)
        assert TOKEN[4:] not in grant_shown(request)
