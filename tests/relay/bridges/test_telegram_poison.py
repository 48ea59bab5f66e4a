"""One Telegram update that cannot be applied must not block every later one.

Telegram delivers updates in order and redelivers one until it is confirmed. The poller
confirmed only applied updates, so one that raised was retried for ever and every later
press waited behind it. Now a database outage is retried without end (nothing is lost),
and an update that itself raises is dropped after a few tries, loudly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import OperationalError
from prometheus_client import REGISTRY

from tests.relay.bridges.conftest import ALICE_TG, CHAT_ID, ask, decision_of

pytestmark = pytest.mark.django_db(transaction=True)


def dropped() -> float:
    return REGISTRY.get_sample_value("gatehouse_chat_dropped_updates_total", {"surface": "telegram"}) or 0


@contextmanager
def polling(bridge: Any) -> Iterator[Any]:
    from relay.bridges.telegram import TelegramPoller

    poller = TelegramPoller(bridge, poll_timeout=1, max_backoff=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=poller.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield poller
    finally:
        stop.set()
        thread.join(10)


class FailingBridge:
    """The real bridge, with one update made to fail as a bug or a broken database would.

    Chosen by its text, so the rest (every other update) goes through the real code.
    """

    def __init__(self, bridge: Any, text: str, error: Exception, times: int) -> None:
        self.bridge, self.text, self.error, self.left = bridge, text, error, times
        self.config, self.tries = bridge.config, 0

    def apply_update(self, update: Any) -> bool:
        if update.message is not None and update.message.text == self.text and self.left:
            self.left -= 1
            self.tries += 1
            raise self.error
        return bool(self.bridge.apply_update(update))

    def finalise_stragglers(self) -> int:
        return int(self.bridge.finalise_stragglers())


def press_after(fake_tg: Any, ci_bot: Any, poison: dict[str, Any], command: str = "npm run build") -> tuple[Any, int]:
    """Send `poison`, then a genuine Allow press; return the request and the press's update."""
    request = ask(ci_bot.agent, command)
    card = fake_tg.wait_for(lambda: fake_tg.card_for(command))
    fake_tg.add_raw(poison)
    return request, fake_tg.press(card, "Allow once", user_id=ALICE_TG)


def say(text: str) -> dict[str, Any]:
    return {
        "message": {
            "message_id": 900,
            "date": int(time.time()),
            "chat": {"id": ALICE_TG, "type": "private"},
            "from": {"id": ALICE_TG, "is_bot": False, "first_name": "a"},
            "text": text,
        }
    }


class PoisonUpdateTests:
    def test_an_update_that_raises_is_dropped_and_the_next_press_is_applied(self, fake_tg, telegram_bridge, ci_bot):
        before = dropped()
        failing = FailingBridge(telegram_bridge, "poison", RuntimeError("cannot apply"), times=100)
        with polling(failing):
            request, update_id = press_after(fake_tg, ci_bot, say("poison"))
            fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}"))
        assert decision_of(request).behavior == "allow"
        assert failing.tries == 3 and dropped() == before + 1

    def test_a_database_outage_is_retried_until_it_heals_and_nothing_is_dropped(self, fake_tg, telegram_bridge, ci_bot):
        before = dropped()
        failing = FailingBridge(telegram_bridge, "/link AAAA-AAAA", OperationalError("database is away"), times=6)
        with polling(failing):
            request, update_id = press_after(fake_tg, ci_bot, say("/link AAAA-AAAA"))
            fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}"))
            # Applied at last (its answer reached the chat), not dropped after 3 tries.
            fake_tg.wait_for(lambda: fake_tg.sent_to(ALICE_TG))
        assert failing.tries == 6 and dropped() == before
        assert decision_of(request).behavior == "allow"


# Real updates the bridge met in the wild or could: each must be applied or ignored, never raise.
ODD_UPDATES = {
    "a reply with no sender (a channel post)": {
        "message": {
            "message_id": 1,
            "date": 0,
            "chat": {"id": int(CHAT_ID), "type": "channel"},
            "text": "-",
            "reply_to_message": {"message_id": 2, "date": 0, "chat": {"id": int(CHAT_ID), "type": "channel"}},
        }
    },
    "/link with no sender": {
        "message": {"message_id": 3, "date": 0, "chat": {"id": int(CHAT_ID), "type": "supergroup"}, "text": "/link X"}
    },
    "/link with no code": say("/link"),
    "/link with a huge code": say("/link " + "A" * 5000),
    "a photo, no text": {
        "message": {
            "message_id": 4,
            "date": 0,
            "chat": {"id": ALICE_TG, "type": "private"},
            "from": {"id": ALICE_TG, "is_bot": False, "first_name": "a"},
            "photo": [],
        }
    },
    "a press on a message that is gone": {
        "callback_query": {
            "id": "cqx",
            "from": {"id": ALICE_TG, "is_bot": False, "first_name": "a"},
            "chat_instance": "c",
            "data": "g1o" + "0" * 52,
        }
    },
    "a press with no data": {
        "callback_query": {
            "id": "cqy",
            "from": {"id": ALICE_TG, "is_bot": False, "first_name": "a"},
            "chat_instance": "c",
        }
    },
    "a reply to a message that is not ours": {
        "message": {
            "message_id": 5,
            "date": 0,
            "chat": {"id": int(CHAT_ID), "type": "group"},
            "from": {"id": ALICE_TG, "is_bot": False, "first_name": "a"},
            "text": "x",
            "reply_to_message": {"message_id": 77777, "date": 0, "chat": {"id": int(CHAT_ID), "type": "group"}},
        }
    },
}


class OddUpdateCorpusTests:
    def test_no_odd_update_raises_or_blocks_the_press_behind_it(self, fake_tg, telegram_bridge, ci_bot):
        before = dropped()
        with polling(telegram_bridge) as poller:
            for n, (label, update) in enumerate(ODD_UPDATES.items()):
                request, update_id = press_after(fake_tg, ci_bot, update, f"npm run build-{n}")
                fake_tg.wait_for(lambda update_id=update_id: fake_tg.toast_for(f"cq{update_id}"))
                assert decision_of(request).behavior == "allow", label
                assert poller.failures == {}, label  # it was applied or ignored the first time
        assert dropped() == before
