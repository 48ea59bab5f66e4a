"""A live server shared by a test module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.live import LiveServer, live_server


@pytest.fixture(scope="module")
def relay_server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    """A Daphne server with a 1 s sweep interval, on the run's database and Redis."""
    with django_db_blocker.unblock(), live_server(GATEHOUSE_SWEEP_INTERVAL="1") as srv:
        yield srv
