"""What the tests of serializers whose fields are bound once share (`api.common.FieldsBoundOnce`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any


def mismatches_from_threads(outcome: Callable[[Any], Any], inputs: Sequence[Any], threads: int = 8) -> list[Any]:
    """Validate `inputs` from many threads at once, each starting at its own offset, and
    return every outcome that differs from the one a single thread got."""
    expected = [outcome(data) for data in inputs]
    barrier = threading.Barrier(threads)
    mismatches: list[Any] = []

    def validate(offset: int) -> None:
        barrier.wait()
        for round_ in range(60):
            i = (offset + round_) % len(inputs)
            found = outcome(inputs[i])
            if found != expected[i]:
                mismatches.append((i, found, expected[i]))

    running = [threading.Thread(target=validate, args=(n,)) for n in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in running), "a validating thread did not finish"
    return mismatches
