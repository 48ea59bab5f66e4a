"""Plug the relay's claim store, announcers and pre-decision providers into approvals."""

from __future__ import annotations


def install() -> None:
    """Called once from `RelayConfig.ready()`."""
    # Chat bridges register themselves as announcers when their env variables are set.
    from relay.bridges.install import install_bridges

    install_bridges()
