"""Telegram, end to end: Daphne posts the card, `run_telegram_bot` applies the press."""

from __future__ import annotations

import signal

import httpx
import pytest

from tests.live import live_server
from tests.relay.bridges.conftest import ALICE_TG, CHAT_ID, AgentCall, telegram_bot, telegram_env, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class TelegramBotTests:
    def test_it_releases_the_agent_when_an_approver_presses_in_telegram(self, fake_tg, ci_bot):
        with live_server(**telegram_env(fake_tg)) as srv, telegram_bot(fake_tg):
            agent = AgentCall(srv.url, ci_bot.token, "npm run lint -- --fix")
            card = fake_tg.wait_for(lambda: fake_tg.card_for("npm run lint -- --fix"))
            update_id = fake_tg.press(card, "Allow for session", user_id=ALICE_TG, username="alice_tg")
            answer = agent.result()
            assert answer.status_code == 200
            decision = answer.json()["decision"]
            assert (decision["behavior"], decision["surface"]) == ("allow", "telegram")
            assert fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}")) == ["Allow for session: done."]
            fake_tg.wait_for(lambda: "✅ Allowed by @alice_tg (telegram) via telegram" in card.text)

    @pytest.mark.slow
    def test_it_loses_no_update_and_applies_none_twice_across_a_restart(self, fake_tg, ci_bot):
        from approvals.models import Decision, PermissionRequest
        from relay.models import ProcessedUpdate

        with live_server(**telegram_env(fake_tg)) as srv:
            agents = [AgentCall(srv.url, ci_bot.token, f"make step-{i}", wait=90) for i in range(12)]
            fake_tg.wait_for(lambda: len(fake_tg.cards()) == 12, timeout=30)
            cards = fake_tg.cards()
            update_ids = [fake_tg.press(card, "Allow once", user_id=ALICE_TG) for card in cards[:6]]
            with telegram_bot(fake_tg) as bot:
                # Kill it hard as soon as it has applied something: mid-stream, no goodbye.
                wait_until(lambda: ProcessedUpdate.objects.filter(surface="telegram").exists(), timeout=30)
                bot.send_signal(signal.SIGKILL)
                bot.wait(10)
            update_ids += [fake_tg.press(card, "Allow once", user_id=ALICE_TG) for card in cards[6:]]
            # The same presses again, as a flaky network would redeliver them.
            redelivered = [
                fake_tg.press_raw(c, c.button("Allow once")["callback_data"], user_id=ALICE_TG) for c in cards[:3]
            ]
            with telegram_bot(fake_tg):
                results = [agent.result(timeout=60) for agent in agents]
                fake_tg.wait_for(lambda: all(fake_tg.toast_for(f"cq{u}") for u in redelivered), timeout=30)
            assert all(r.status_code == 200 and r.json()["decision"]["behavior"] == "allow" for r in results)
            assert Decision.objects.filter(surface="telegram").count() == 12
            assert PermissionRequest.objects.filter(state="pending").count() == 0
            applied = set(ProcessedUpdate.objects.filter(surface="telegram").values_list("update_id", flat=True))
            assert {str(u) for u in update_ids + redelivered} <= applied
            for u in update_ids:  # each press answered at most once (a kill may eat one toast)
                assert len(fake_tg.toast_for(f"cq{u}")) <= 1
            assert all(fake_tg.toast_for(f"cq{u}")[0].startswith("Already decided") for u in redelivered)

    def test_it_takes_updates_by_webhook_with_the_secret_and_applies_each_once(self, fake_tg, ci_bot):
        with live_server(**telegram_env(fake_tg), TELEGRAM_WEBHOOK_SECRET="hook-secret-1") as srv:
            agent = AgentCall(srv.url, ci_bot.token, "dropdb prod")
            card = fake_tg.wait_for(lambda: fake_tg.card_for("dropdb prod"))
            update_id = fake_tg.press(card, "Deny", user_id=ALICE_TG)
            update = next(u for u in fake_tg.updates if u["update_id"] == update_id)
            url = f"{srv.url}/integrations/telegram/webhook"
            wrong = httpx.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "guess"})
            assert wrong.status_code == 401
            missing = httpx.post(url, json=update)
            assert missing.status_code == 401
            for _ in range(2):  # Telegram redelivers when unsure: the second is a no-op
                ok = httpx.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "hook-secret-1"})
                assert ok.status_code == 200
            prompt = fake_tg.wait_for(
                lambda: next((m for m in fake_tg.messages.values() if "Reply to this message" in m.text), None)
            )
            assert sum("Reply to this message" in m.text for m in fake_tg.messages.values()) == 1
            assert prompt.chat_id == CHAT_ID
            bad = httpx.post(url, content=b"{not json", headers={"X-Telegram-Bot-Api-Secret-Token": "hook-secret-1"})
            assert bad.status_code == 400
            from relay.models import SurfaceMessage

            wait_until(lambda: SurfaceMessage.objects.filter(surface="telegram.reason").exists())
            reply_id = fake_tg.reply(prompt, "-", user_id=ALICE_TG)
            reply = next(u for u in fake_tg.updates if u["update_id"] == reply_id)
            assert httpx.post(url, json=reply, headers={"X-Telegram-Bot-Api-Secret-Token": "hook-secret-1"}).is_success
            decision = agent.result().json()["decision"]
            assert decision["behavior"] == "deny"
            assert decision["message"].startswith("Denied by")  # "-" means no reason: the default message
