"""A real Gatehouse server for end-to-end tests: Daphne in a subprocess on a free port.

It shares the test database (use `transactional_db` so rows are committed and visible)
and the run's Redis, so a test can drive it over HTTP and WebSocket exactly as an agent,
a browser or a chat service would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from bench.ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
# A bound, not a pause: a server starts in about a second, but on a shared 2-core machine
# under a full test run its imports have taken over 20 s.
STARTUP_TIMEOUT = 60.0


def test_database_url() -> str:
    """The URL of the database pytest-django created for this run."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = quote(db.get("USER") or "")
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


class LiveServer:
    def __init__(self, port: int, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.port = port
        self.process = process
        self.log_path = log_path
        self.url = f"http://127.0.0.1:{port}"
        self.ws_url = f"ws://127.0.0.1:{port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=20)


def server_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=test_database_url(),
        DJANGO_SETTINGS_MODULE="gatehouse.settings",
        PYTHONUNBUFFERED="1",
        # Each test server stands alone, as `make run` does, so it sweeps its own
        # deadlines; a test of the separate sweeper process passes "0".
        GATEHOUSE_INPROCESS_SWEEPER="1",
    )
    env.update(extra)
    return env


@contextmanager
def live_server(
    *, port: int | None = None, server: str = "daphne", daphne_args: tuple[str, ...] = (), **env: str
) -> Iterator[LiveServer]:
    """Start a Gatehouse server process; stop it (and wait) on exit.

    - `daphne_args`: more of Daphne's own options, for `daphne` and `serve`.
    """
    port = port or free_port()
    log_dir = ROOT / "var" / "test-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"server-{port}.log"
    bin_dir = Path(sys.executable).parent
    if server == "daphne":
        cmd = [str(bin_dir / "daphne"), "-b", "127.0.0.1", "-p", str(port), *daphne_args, "gatehouse.asgi:application"]
    elif server == "serve":  # Daphne with the drain on SIGTERM, as production runs it
        serve = [sys.executable, "-m", "gatehouse.serve"]
        cmd = [*serve, "-b", "127.0.0.1", "-p", str(port), *daphne_args, "gatehouse.asgi:application"]
    else:
        cmd = [str(bin_dir / "uvicorn"), "--host", "127.0.0.1", "--port", str(port), "gatehouse.asgi:application"]
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(cmd, cwd=ROOT, env=server_env(**env), stdout=log_file, stderr=subprocess.STDOUT)
    live = LiveServer(port, process, log_path)
    try:
        wait_for_port(port, timeout=STARTUP_TIMEOUT, process=process)
        yield live
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


class SweeperProcess:
    def __init__(self, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.process = process
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextmanager
def sweeper_process(interval: float = 1.0, **env: str) -> Iterator[SweeperProcess]:
    """Run `manage.py run_sweeper` on the test database, as production runs it beside the servers."""
    log_dir = ROOT / "var" / "test-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"sweeper-{os.getpid()}-{id(env)}.log"
    cmd = [sys.executable, "manage.py", "run_sweeper", "--interval", str(interval)]
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(cmd, cwd=ROOT, env=server_env(**env), stdout=log_file, stderr=subprocess.STDOUT)
    try:
        yield SweeperProcess(process, log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
