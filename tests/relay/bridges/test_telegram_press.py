"""Telegram: an ask becomes a message with buttons, and presses go through the race."""

from __future__ import annotations

import pytest

from tests.relay.bridges.conftest import ALICE_TG, CHAT_ID, STRANGER_TG, ask, decision_of, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class TelegramAskTests:
    def test_it_posts_a_message_with_the_command_warning_link_and_four_buttons(self, fake_tg, telegram_bridge, ci_bot):
        request = ask(ci_bot.agent, "npm run build && echo '<done>'")
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        assert card.chat_id == CHAT_ID
        escaped = "npm run build &amp;&amp; echo &#x27;&lt;done&gt;&#x27;"
        assert f'<pre><code class="language-bash">{escaped}</code></pre>' in card.text
        assert f"/requests/{request.pk}/" in card.text
        # The rule a grant saves is on the card, verbatim, before the tap.
        assert f"save <code>Bash({escaped})</code>" in card.text
        assert [b["text"] for b in card.buttons] == ["Allow once", "Allow for session", "Always allow", "Deny"]
        assert all(len(b["callback_data"].encode()) <= 64 for b in card.buttons)
        warning = (request.evaluation or {}).get("destructive_warning")
        if warning:  # the engine flags rm -rf; the card must carry its words
            assert "Destructive" in card.text

    def test_it_cuts_long_input_and_links_to_the_dashboard(self, fake_tg, telegram_bridge, ci_bot):
        ask(ci_bot.agent, "printf " + "x" * 5000)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        assert len(card.text) < 2000
        # 5,007 characters, about 1,200 shown: the card says how much it left out, and offers no Allow.
        assert "more characters — open the dashboard to read all" in card.text
        assert "Open in Gatehouse" in card.text
        assert [b["text"] for b in card.buttons] == ["Deny"]


class TelegramGrantTests:
    def test_a_call_no_rule_can_say_exactly_offers_allow_once_only(self, fake_tg, telegram_bridge, ci_bot):
        ask(ci_bot.agent, "rm -rf build")
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        assert [b["text"] for b in card.buttons] == ["Allow once", "Deny"]
        assert "save <code>" not in card.text


class TelegramPressTests:
    def test_it_decides_when_an_approver_presses_and_edits_the_message(
        self, fake_tg, telegram_bridge, telegram_poller, ci_bot
    ):
        request = ask(ci_bot.agent)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        update_id = fake_tg.press(card, "Allow once", user_id=ALICE_TG, username="alice_tg")
        fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}"))
        decision = decision_of(request)
        assert decision.behavior == "allow"
        assert decision.surface == "telegram"
        assert decision.decided_by == "@alice_tg (telegram)"
        fake_tg.wait_for(lambda: "✅ Allowed by @alice_tg (telegram) via telegram" in card.text)
        assert card.reply_markup is None  # the buttons are gone

    def test_it_names_the_linked_gatehouse_user_in_the_audit_log(
        self, fake_tg, telegram_bridge, telegram_poller, ci_bot, alice
    ):
        from django.utils import timezone

        from approvals.models import ChatIdentity

        ChatIdentity.objects.create(
            user=alice, provider="telegram", external_id=str(ALICE_TG), proven_at=timezone.now()
        )
        request = ask(ci_bot.agent, "npm run build")
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        update_id = fake_tg.press(card, "Always allow", user_id=ALICE_TG)
        fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}"))
        decision = decision_of(request)
        assert (decision.decided_by, decision.decided_by_user_id) == ("alice", alice.pk)
        assert decision.reason.get("saved_rule")

    def test_it_refuses_a_non_approver_with_a_toast_and_counts_it(
        self, fake_tg, telegram_bridge, telegram_poller, ci_bot
    ):
        from prometheus_client import REGISTRY

        before = REGISTRY.get_sample_value("gatehouse_chat_refused_presses_total", {"surface": "telegram"}) or 0
        request = ask(ci_bot.agent)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        update_id = fake_tg.press(card, "Allow once", user_id=STRANGER_TG, username="mallory_tg")
        toast = fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}"))
        assert "not allowed" in toast[0]
        assert decision_of(request) is None
        after = REGISTRY.get_sample_value("gatehouse_chat_refused_presses_total", {"surface": "telegram"})
        assert after == before + 1

    def test_it_refuses_a_listed_approver_linked_to_another_team(
        self, fake_tg, telegram_bridge, telegram_poller, ci_bot, mallory
    ):
        from django.utils import timezone

        from approvals.models import ChatIdentity

        # Proven (Alice's account sent Mallory's code): the person behind it decides nothing here.
        ChatIdentity.objects.create(
            user=mallory, provider="telegram", external_id=str(ALICE_TG), proven_at=timezone.now()
        )
        request = ask(ci_bot.agent)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        update_id = fake_tg.press(card, "Allow once", user_id=ALICE_TG)
        assert "not allowed" in fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}"))[0]
        assert decision_of(request) is None

    def test_it_refuses_forged_callback_data(self, fake_tg, telegram_bridge, telegram_poller, ci_bot):
        request = ask(ci_bot.agent)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        genuine = card.button("Deny")["callback_data"]
        forged = genuine[:2] + "o" + genuine[3:]  # turn Deny into Allow once, keep the MAC
        update_id = fake_tg.press_raw(card, forged, user_id=ALICE_TG)
        assert "not allowed" in fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}"))[0]
        assert decision_of(request) is None

    def test_it_tells_a_late_presser_who_decided(self, fake_tg, telegram_bridge, telegram_poller, ci_bot, alice):
        from approvals.services import Answer
        from relay import race

        request = ask(ci_bot.agent)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        stale = card.button("Allow once")["callback_data"]  # the phone still shows the old buttons
        assert race.answer(request.pk, Answer(behavior="deny", surface="web", user=alice)).won
        update_id = fake_tg.press_raw(card, stale, user_id=ALICE_TG)
        toast = fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}"))
        assert toast[0].startswith("Already decided by alice via web")
        assert decision_of(request).behavior == "deny"

    def test_it_asks_for_a_deny_reason_by_reply_and_passes_it_to_the_agent(
        self, fake_tg, telegram_bridge, telegram_poller, ci_bot
    ):
        from relay.models import SurfaceMessage

        request = ask(ci_bot.agent)
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        fake_tg.press(card, "Deny", user_id=ALICE_TG, username="alice_tg")
        prompt = fake_tg.wait_for(
            lambda: next((m for m in fake_tg.messages.values() if "Reply to this message" in m.text), None)
        )
        assert prompt.reply_markup["force_reply"] is True
        assert decision_of(request) is None  # nothing decided until the reason arrives
        # A person cannot reply within the millisecond between Telegram's answer and our
        # record of the prompt; a test can, so it waits for the record.
        wait_until(lambda: SurfaceMessage.objects.filter(surface="telegram.reason").exists())
        fake_tg.reply(prompt, "use the staging database instead", user_id=ALICE_TG, username="alice_tg")
        fake_tg.wait_for(lambda: "⛔ Denied" in card.text)
        decision = decision_of(request)
        assert (decision.behavior, decision.message) == ("deny", "use the staging database instead")
        assert "use the staging database instead" in card.text
