"""A bridge's sender thread goes on when giving back its database connection fails.

The thread makes each bridge's calls and gives back its connection after every job. A
failure there (seen when a job ran on into a test that blocks the database) escaped the
job's own error handling and ended the thread: the posts queued behind it waited for the
next one to be queued, and the failure reached no log of ours.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from django.db import connection

from relay.bridges.base import Job, SendQueue

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failed_give_back_is_logged_and_the_same_thread_goes_on(django_db_blocker: Any, caplog: Any) -> None:
    queue = SendQueue(name="give-back")
    opened, go_on, ran = threading.Event(), threading.Event(), []

    def hold_a_connection() -> None:
        connection.ensure_connection()  # the sender's thread now has a connection to give back
        opened.set()
        go_on.wait(10)

    try:
        queue.put(Job(key="", run=hold_a_connection, label="first"))
        assert opened.wait(10)
        worker = queue._thread
        with caplog.at_level(logging.ERROR, logger="relay.bridges.base"), django_db_blocker.block():
            # Giving the connection back now fails: Django reads its autocommit setting
            # through ensure_connection, which the blocker refuses.
            go_on.set()
            assert queue.wait_idle(10)
        queue.put(Job(key="", run=lambda: ran.append("second"), label="second"))
        assert queue.wait_idle(10)
        assert ran == ["second"]
        assert queue._thread is worker and worker is not None and worker.is_alive()
        assert "giving back the database connection after first failed" in caplog.text
    finally:
        go_on.set()
        queue.stop()
