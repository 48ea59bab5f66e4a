"""`python manage.py run_telegram_bot`: long-poll Telegram and apply button presses."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from relay.bridges import telegram


class Command(BaseCommand):
    help = "Long-poll the Telegram Bot API and apply approvers' button presses (Ctrl-C to stop)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--poll-timeout", type=int, default=25, help="getUpdates long-poll seconds (default 25)")

    def handle(self, *args: Any, **options: Any) -> None:
        bridge = telegram.get_bridge()
        if bridge is None:
            raise CommandError("The Telegram bridge is off: set TELEGRAM_BOT_TOKEN and TELEGRAM_CHAT_ID.")
        if bridge.config.webhook_secret:
            self.stderr.write("TELEGRAM_WEBHOOK_SECRET is set: Telegram refuses getUpdates while a webhook is set.")
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        poller = telegram.TelegramPoller(bridge, poll_timeout=options["poll_timeout"])
        self.stdout.write(f"Polling Telegram at {bridge.config.api_url} for chat {bridge.config.chat_id}.", ending="\n")
        self.stdout.flush()
        poller.run(stop)
        # Toasts and edits still queued are worth a few seconds before we go.
        bridge.queue.wait_idle(10)
        bridge.queue.stop()
        self.stdout.write(f"Stopped after applying {poller.applied} updates.")
