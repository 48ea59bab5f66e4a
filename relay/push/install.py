"""Register the push announcers: Web Push always (people opt in), ntfy when GATEHOUSE_NTFY_URL is set."""

from __future__ import annotations

from django.conf import settings

from approvals.extensions import Announcer, registry


def install_push() -> list[str]:
    from relay.push import webpush

    installed: list[Announcer] = [webpush.get_announcer()]
    if settings.GATEHOUSE_NTFY_URL:
        from relay.push import ntfy

        installed.append(ntfy.get_announcer())
    for announcer in installed:
        registry.add_announcer(announcer)
    return [announcer.name for announcer in installed]
