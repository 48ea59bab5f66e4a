"""Live servers shared by a test module, and this run's own Redis prefix in-process too."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.live import LiveServer, live_server


@pytest.fixture(scope="session", autouse=True)
def run_redis_prefix() -> Iterator[str]:
    """Use the run's Redis prefix in this process as well as in the live servers.

    `tests/conftest.py` sets `GATEHOUSE_REDIS_PREFIX` in the environment, but pytest-django
    has loaded the settings by then, so this process would talk to the default prefix
    while the servers it starts use the run's own: their events and claims would never
    meet. Point the channel layer and the claim store at the run's prefix here.
    """
    from channels.layers import channel_layers
    from django.conf import settings

    from approvals.extensions import registry
    from relay import claims

    prefix = os.environ["GATEHOUSE_REDIS_PREFIX"]
    saved = (settings.GATEHOUSE_REDIS_PREFIX, copy.deepcopy(settings.CHANNEL_LAYERS), registry.claim_store)
    layers: dict[str, Any] = copy.deepcopy(settings.CHANNEL_LAYERS)
    config: dict[str, Any] = layers["default"].get("CONFIG", {})
    if "prefix" in config:
        config["prefix"] = prefix
    settings.GATEHOUSE_REDIS_PREFIX = prefix
    settings.CHANNEL_LAYERS = layers
    channel_layers.backends.clear()
    registry.claim_store = claims.build_claim_store()
    yield prefix
    settings.GATEHOUSE_REDIS_PREFIX, settings.CHANNEL_LAYERS, registry.claim_store = saved
    channel_layers.backends.clear()


@pytest.fixture(scope="module")
def relay_server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    """A Daphne server with a 1 s sweep interval, on the run's database and Redis."""
    with django_db_blocker.unblock(), live_server(GATEHOUSE_SWEEP_INTERVAL="1") as srv:
        yield srv
