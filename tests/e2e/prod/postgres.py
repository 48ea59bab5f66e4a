"""A PostgreSQL database for the production layout: on the shared server, or a private one.

The shared server is the one `make test`'s PostgreSQL pass uses; when none answers, a
private cluster is initialised in `var/` and started on a free port (as an unprivileged
user when the tests run as root: PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from tests.live import ROOT, free_port

SHARED_URL = os.environ.get("GATEHOUSE_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
START_TIMEOUT = 30.0


def answers(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.Error:
        return False
    return True


def _as_postgres_user(cmd: list[str], directory: str) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    shutil.chown(directory, "nobody")
    return ["runuser", "-u", "nobody", "--", *cmd]


@contextmanager
def private_server() -> Iterator[str]:
    """Start a throwaway PostgreSQL cluster; yield its server URL (database `postgres`)."""
    initdb = shutil.which("initdb")
    postgres = shutil.which("postgres")
    assert initdb and postgres, "PostgreSQL's initdb and postgres are needed when no server answers"
    (ROOT / "var").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "var", prefix="pg-") as directory:
        os.chmod(directory, 0o700)
        data = os.path.join(directory, "data")
        port = free_port()
        init = [initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"]
        subprocess.run(_as_postgres_user(init, directory), check=True, capture_output=True)
        run = [postgres, "-D", data, "-p", str(port), "-h", "127.0.0.1", "-k", directory, "-F"]
        command = _as_postgres_user(run, directory)
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"postgres://postgres@127.0.0.1:{port}/postgres"
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not answers(url):
                assert server.poll() is None and time.monotonic() < deadline, "the private PostgreSQL did not start"
                time.sleep(0.1)
            yield url
        finally:
            server.terminate()
            server.wait(timeout=20)


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty database for one run, dropped afterwards; yield its URL."""
    with contextmanager(_server_url)() as server_url:
        name = f"gatehouse_prod_{os.getpid()}"
        base = server_url.rsplit("/", 1)[0]
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")
            admin.execute(f"CREATE DATABASE {name}")
        try:
            yield f"{base}/{name}"
        finally:
            with psycopg.connect(server_url, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _server_url() -> Iterator[str]:
    if answers(SHARED_URL):
        yield SHARED_URL
        return
    with private_server() as url:
        yield url
