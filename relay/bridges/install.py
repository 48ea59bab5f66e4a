"""Register the chat bridges whose environment variables are set."""

from __future__ import annotations

import logging

from django.conf import settings

from approvals.extensions import registry

log = logging.getLogger(__name__)


def install_bridges() -> list[str]:
    """Add each configured bridge to the announcers; return the names installed."""
    installed = []
    # Imported only when enabled: a server without chat bridges never loads the SDKs.
    if settings.TELEGRAM_BOT_TOKEN:
        from relay.bridges import telegram

        bridge = telegram.get_bridge()
        if bridge is None:
            log.warning("TELEGRAM_BOT_TOKEN is set but the Telegram bridge could not be made")
        else:
            registry.add_announcer(bridge)
            installed.append(bridge.name)
    if settings.SLACK_BOT_TOKEN:
        from relay.bridges import slack

        slack_bridge = slack.get_bridge()
        if slack_bridge is None:
            log.warning("SLACK_BOT_TOKEN is set but SLACK_SIGNING_SECRET is not: Slack is off")
        else:
            registry.add_announcer(slack_bridge)
            installed.append(slack_bridge.name)
    if installed:
        log.info("chat bridges enabled: %s", ", ".join(installed))
    return installed
