"""A server process's garbage collector does not walk the code it loaded at start-up.

A full pass over the ~150,000 objects of a loaded process took ~100 ms on a 2-core host,
stalling every socket of the process; with them frozen (`gc.freeze()` in
`gatehouse.asgi`), a full pass took ~5 ms (docs/PERFORMANCE.md, sixth pass).
"""

from __future__ import annotations

import subprocess
import sys

from tests.live import ROOT, server_env

PROBE = """
import gc
import gatehouse.asgi
frozen = gc.get_freeze_count()
gc.collect()
print(frozen, len(gc.get_objects()))
"""


def test_what_the_server_loaded_at_start_is_frozen_out_of_the_collectors_passes() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    frozen, walked = (int(n) for n in done.stdout.split())
    # The URLconf's views, serializers and the relay are loaded and frozen; what a pass
    # still walks is a small part of it.
    assert frozen > 50_000
    assert walked < frozen / 2, (frozen, walked)
