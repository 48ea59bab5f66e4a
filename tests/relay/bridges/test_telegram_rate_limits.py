"""Telegram: a burst of asks is spread under the flood limits and none is lost."""

from __future__ import annotations

import pytest

from tests.relay.bridges.conftest import CHAT_ID, ask

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def paced_bridge(fake_tg, transactional_db):
    """A bridge sending at most one message per 30 ms to a chat that allows one per 20 ms."""
    from approvals.extensions import registry
    from relay.bridges.telegram import TelegramBridge, TelegramConfig

    fake_tg.chat_interval = 0.02
    bridge = TelegramBridge(
        TelegramConfig(token=fake_tg.token, chat_id=CHAT_ID, approvers=[], api_url=fake_tg.url, chat_interval=0.03)
    )
    registry.add_announcer(bridge)
    yield bridge
    registry.announcers.remove(bridge)
    bridge.queue.wait_idle(10)
    bridge.queue.stop()


class TelegramRateLimitTests:
    def test_it_delivers_a_burst_of_100_asks_without_a_429(self, fake_tg, paced_bridge, ci_bot):
        requests = [ask(ci_bot.agent, f"make target-{i}", tool_use_id=f"burst-{i}") for i in range(100)]
        fake_tg.wait_for(lambda: len(fake_tg.cards()) == 100, timeout=60)
        assert fake_tg.rate_limited == 0
        posted = {card.text.split("make ")[1].split("<")[0] for card in fake_tg.cards()}
        assert posted == {f"target-{i}" for i in range(100)}
        from relay.models import SurfaceMessage

        assert paced_bridge.queue.wait_idle(10)
        assert SurfaceMessage.objects.filter(request__in=requests, surface="telegram").count() == 100

    def test_it_waits_out_retry_after_and_loses_nothing(self, fake_tg, paced_bridge, ci_bot):
        fake_tg.fail_next["sendMessage"] = [429, 429, 502]
        for i in range(3):
            ask(ci_bot.agent, f"make again-{i}", tool_use_id=f"retry-{i}")
        fake_tg.wait_for(lambda: len(fake_tg.cards()) == 3, timeout=30)
        assert fake_tg.rate_limited == 2
        order = [card.text.split("make ")[1].split("<")[0] for card in fake_tg.cards()]
        assert order == ["again-0", "again-1", "again-2"]  # a retried message keeps its place
