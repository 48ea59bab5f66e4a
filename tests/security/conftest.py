"""A live server shared by a security test module (starting Daphne costs seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.live import LiveServer, live_server


@pytest.fixture(scope="module")
def security_server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    with django_db_blocker.unblock(), live_server() as srv:
        yield srv
