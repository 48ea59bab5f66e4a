"""Chat cards of a quorum: "1 of 2 — alice approved" after each vote, a nudge per ladder step."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from approvals import services
from approvals.models import ChatIdentity, PermissionRequest
from tests.conftest import _person
from tests.relay.bridges.conftest import ALICE_TG, ask, decision_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_approvals(default_team: Any) -> Any:
    services.rule_create(
        rule="Bash(rm:*)", behavior="ask", source="localSettings", team=default_team, approvals_required=2
    )
    services.team_settings_update(team=default_team, remind_after=100)
    return _person("carol", default_team, "approver")


class TelegramQuorumTests:
    def test_a_press_counts_as_one_vote_and_the_card_shows_it_until_the_quorum_allows(
        self, fake_tg, telegram_bridge, telegram_poller, ci_bot, alice, two_approvals
    ):
        ChatIdentity.objects.create(
            user=alice, provider="telegram", external_id=str(ALICE_TG), proven_at=timezone.now()
        )
        request = ask(ci_bot.agent)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        assert [b["text"] for b in card.buttons] == ["Allow once", "Deny"]  # no grant: each approves once

        update_id = fake_tg.press(card, "Allow once", user_id=ALICE_TG)
        assert fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}")) == ["Approved: 1 of 2 — alice approved."]
        fake_tg.wait_for(lambda: "1 of 2 — alice approved" in card.text)
        assert card.buttons and decision_of(request) is None

        PermissionRequest.objects.filter(pk=request.pk).update(remind_at=timezone.now())
        assert services.request_ladder_step(request=request, kind="reminder") is not None
        nudge = fake_tg.wait_for(
            lambda: next((m for m in fake_tg.messages.values() if m.text.startswith("⏰ Reminder")), None)
        )
        assert "1 of 2 — alice approved" in nudge.text
        fake_tg.wait_for(lambda: "Reminded at" in card.text)

        services.request_decide(request.pk, services.Answer(behavior="allow", surface="web", user=two_approvals))
        fake_tg.wait_for(lambda: "Allowed by alice and carol via web" in card.text)
        assert card.reply_markup is None


class SlackQuorumTests:
    def test_a_vote_on_the_web_updates_the_slack_card_in_place(
        self, fake_sl, slack_bridge, ci_bot, alice, two_approvals
    ):
        request = ask(ci_bot.agent)
        card = fake_sl.wait_for(lambda: next(iter(fake_sl.cards()), None))
        services.request_decide(request.pk, services.Answer(behavior="allow", surface="web", user=alice))
        fake_sl.wait_for(lambda: "1 of 2 — alice approved" in card.all_text)
        assert card.buttons  # still open for the second approver
