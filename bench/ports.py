"""Free ports and waiting for a server to listen: shared by the benchmarks and the tests' live servers.

It lives in bench/ because the benchmarks ship as tooling and must not depend on the test
suite; tests/live.py imports it from here.
"""

from __future__ import annotations

import socket
import subprocess
import time
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
