"""Free ports and waiting for a server to listen: shared by the benchmarks and the tests' live servers.

It lives in bench/ because the benchmarks ship as tooling and must not depend on the test
suite; tests/live.py imports it from here.
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

# Hypothesis seeds the module-level random during a test: free ports come from our own.
_random = random.SystemRandom()
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port() -> int:
    """A port free on 127.0.0.1, below the kernel's range of ephemeral ports.

    The kernel hands ports from that range to outgoing connections, so a port found free
    there can be taken by some client between the check and the server's bind, or while a
    server restarts on it (seen under a full test run: a web process of `make prod` could
    not listen). Below the range only another listener can take a port, and `is_free`
    skips those.
    """
    high = _ephemeral_low()
    low = max(1024, high - 16384)
    for _ in range(200):
        port = _random.randrange(low, high)
        if is_free(port):
            return port
    raise RuntimeError(f"no free port found in {low}-{high - 1}")


def is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):  # not Linux: the IANA range's start
        return 49152


def wait_for_port(port: int, timeout: float = 30.0, process: subprocess.Popen[Any] | None = None) -> None:
    """Return once something accepts connections on 127.0.0.1:`port`; fail early if `process` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited early with code {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port} within {timeout}s")
