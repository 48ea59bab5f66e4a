"""Plug the relay's claim store, announcers and pre-decision providers into approvals."""

from __future__ import annotations


def install() -> None:
    """Called once from `RelayConfig.ready()`."""
