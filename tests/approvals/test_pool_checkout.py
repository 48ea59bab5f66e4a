"""`gatehouse.postgresql`: a pooled connection the server ended is not handed out, and a
sound one is handed out without a query."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.backends.postgresql.base import DatabaseWrapper as DjangosWrapper

from gatehouse.postgresql.base import DatabaseWrapper, sound

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def pooled() -> Iterator[Callable[[type[Any]], Any]]:
    """`pooled(wrapper_class)`: a database wrapper of the test database with a pool of one.

    One connection, so a checkout can only be the connection the test returned or its
    replacement (a larger pool grows while its first connection opens, and may hand out
    the other one).
    """
    assert connection.vendor == "postgresql", "run with DATABASE_URL=postgres://… (marker: postgresql)"
    made: list[Any] = []

    def make(wrapper_class: type[Any]) -> Any:
        settings = {
            **connection.settings_dict,
            "CONN_MAX_AGE": 0,
            "CONN_HEALTH_CHECKS": False,
            "OPTIONS": {**connection.settings_dict["OPTIONS"], "pool": {"min_size": 1, "max_size": 1, "timeout": 5}},
        }
        made.append(wrapper_class(settings, alias=f"pooled-{len(made)}"))
        return made[-1]

    yield make
    for wrapper in made:
        wrapper.close()
        wrapper.close_pool()


@pytest.fixture
def checked(pooled: Callable[[type[Any]], Any]) -> Any:
    return pooled(DatabaseWrapper)


def backend_pid(wrapper: Any) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def end_session(pid: int, pooled_connection: Any) -> None:
    """End one session from the server's side, as a restart does, and wait until it has."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 10
    while sound(pooled_connection):  # the server's goodbye has not reached the socket yet
        assert time.monotonic() < deadline, "the session did not end within 10 s"
        time.sleep(0.01)


def test_a_connection_the_server_ended_is_replaced_on_checkout(checked: Any) -> None:
    first = backend_pid(checked)
    raw = checked.connection
    checked.close()  # back to the pool, idle
    end_session(first, raw)
    assert backend_pid(checked) != first  # another connection, and it answers


def test_without_the_check_the_ended_connection_is_handed_out(pooled: Callable[[type[Any]], Any]) -> None:
    """What the check is for: Django's backend with its pool and no check fails the next call."""
    unchecked = pooled(DjangosWrapper)
    first = backend_pid(unchecked)
    raw = unchecked.connection
    unchecked.close()
    end_session(first, raw)
    with pytest.raises(Exception, match=r"terminat|closed|lost"):
        backend_pid(unchecked)


def test_a_sound_connection_is_handed_out_again_without_a_query(checked: Any) -> None:
    first = backend_pid(checked)
    raw = checked.connection
    checked.close()
    checked.connect()
    assert checked.connection is raw  # the same connection: the check did not discard it
    assert sound(raw)
    # Nothing was sent on it since it was returned: its last statement is still ours.
    with connection.cursor() as cursor:
        cursor.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [first])
        assert cursor.fetchone()[0] == "SELECT pg_backend_pid()"


def test_a_connection_in_a_transaction_is_not_sound(checked: Any) -> None:
    checked.connect()
    raw = checked.connection
    raw.execute("BEGIN")
    assert not sound(raw)
    raw.execute("ROLLBACK")
    assert sound(raw)
