"""`make prod` in a subprocess on free ports, and the ways a test reaches it (HTTPS only)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.ports import free_port, is_free
from tests.live import ROOT

STARTUP_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
WORKERS = 2


@dataclass
class ProdLayout:
    url: str
    port: int
    web_ports: list[int]
    run_dir: Path
    ca_file: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    database_url: str

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def web_pid(self, n: int) -> int:
        return int((self.run_dir / f"web-{n}.pid").read_text().strip())

    def ready_directly(self, n: int) -> bool:
        """Whether web process `n` answers `/readyz` 200 on its own port (behind the proxy)."""
        try:
            return httpx.get(f"http://127.0.0.1:{self.web_ports[n - 1]}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False


def consecutive_free_ports(count: int) -> int:
    """The first of `count` consecutive ports free on 127.0.0.1 (make prod numbers them so)."""
    for _ in range(50):
        first = free_port()
        if all(is_free(first + i) for i in range(1, count)):
            return first
    raise AssertionError("no run of free ports found")


def _wait_ready(layout: ProdLayout) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        assert layout.process.poll() is None, f"make prod exited:\n{layout.log()[-4000:]}"
        if layout.ca_file.exists() and all(layout.ready_directly(n) for n in range(1, WORKERS + 1)):
            try:
                if httpx.get(f"{layout.url}/readyz", verify=layout.ssl_context(), timeout=3).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
        time.sleep(0.2)
    raise AssertionError(f"make prod never became ready:\n{layout.log()[-4000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@contextmanager
def make_prod(database_url: str, redis_url: str, **extra: str) -> Iterator[ProdLayout]:
    """Run `make prod` (WORKERS Daphne processes behind Caddy); stop it on exit."""
    port, web_port = free_port(), consecutive_free_ports(WORKERS)
    run_dir = ROOT / "var" / f"test-prod-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        GATEHOUSE_REDIS_PREFIX=f"gh-prod-{os.getpid()}-{secrets.token_hex(3)}",
        PORT=str(port),
        WEB_PORT=str(web_port),
        WORKERS=str(WORKERS),
        BIND="127.0.0.1",
        GATEHOUSE_RUN_DIR=str(run_dir),
        GATEHOUSE_ASK_TIMEOUT="300",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    venv = Path(sys.executable).parent.parent
    log_path = run_dir / "make-prod.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "prod", f"VENV={venv}"],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    layout = ProdLayout(
        url=f"https://localhost:{port}",
        port=port,
        web_ports=[web_port + i for i in range(WORKERS)],
        run_dir=run_dir,
        ca_file=run_dir / "caddy-data" / "caddy" / "pki" / "authorities" / "local" / "root.crt",
        process=process,
        log_path=log_path,
        database_url=database_url,
    )
    try:
        _wait_ready(layout)
        yield layout
    finally:
        _stop(process)
    # The log outlives the run directory, for the failure that needs it.
    logs = ROOT / "var" / "test-logs"
    logs.mkdir(parents=True, exist_ok=True)
    shutil.copy(log_path, logs / f"make-prod-{os.getpid()}.log")
    shutil.rmtree(run_dir, ignore_errors=True)


def drained_counts(log: str) -> list[int]:
    return [int(n) for n in re.findall(r"drained (\d+) socket\(s\)", log)]
