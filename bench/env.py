"""The services a benchmark run needs, started by the run and stopped by it.

- Redis: `REDIS_URL` if it answers (only keys under this run's prefix are touched and
  removed), else a private `redis-server` on a free port.
- Databases: `gatehouse_bench_<run>` (and `gatehouse_bench_audit_<run>` for figure 8) on the local
  PostgreSQL, created and dropped by the run; a scratch SQLite file when PostgreSQL is
  not reachable.
- Server processes: Daphne or Uvicorn on free ports, serving `gatehouse.asgi`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PG_ADMIN_URL = os.environ.get("GATEHOUSE_BENCH_PG", "postgres://postgres@127.0.0.1:5432/test")
# Per run, so two runs on one machine never drop each other's databases; the figures'
# subprocesses inherit the run's id through the environment.
RUN_ID = os.environ.setdefault("GATEHOUSE_BENCH_RUN", str(os.getpid()))
BENCH_DB = f"gatehouse_bench_{RUN_ID}"
AUDIT_DB = f"gatehouse_bench_audit_{RUN_ID}"


def rss_kib(pid: int) -> int:
    """Resident memory of a process in KiB, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
    except Exception:
        return False


def pg_url(database: str) -> str:
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{database}"


def pg_answers() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=2):
            return True
    except Exception:
        return False


def pg_recreate(database: str) -> str:
    """Drop and create one of this benchmark's own databases; return its URL."""
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{database}"')
    return pg_url(database)


def pg_drop(database: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@dataclass
class Server:
    kind: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def rss_kib(self) -> int:
        return rss_kib(self.process.pid)

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class BenchEnv:
    quick: bool
    smoke: bool = False  # the smoke tests' size: every figure runs, nothing is meaningful
    work_dir: Path = field(default_factory=lambda: ROOT / "var" / "bench")
    redis_url: str = ""
    redis_prefix: str = field(default_factory=lambda: f"gh-bench-{os.getpid()}")
    database_url: str = ""
    database_kind: str = ""
    postgres: bool = False
    fixtures: dict[str, Any] = field(default_factory=dict)
    _redis_pid_file: Path | None = None
    _private_redis: bool = False
    _servers: list[Server] = field(default_factory=list)

    def pick(self, smoke: Any, quick: Any, full: Any) -> Any:
        """The size of something for this run's mode."""
        return smoke if self.smoke else quick if self.quick else full

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._start_redis()
        self.postgres = pg_answers()
        if self.postgres:
            self.database_url = pg_recreate(BENCH_DB)
            self.database_kind = "postgresql"
        else:
            path = self.work_dir / "bench.sqlite3"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            self.database_url = f"sqlite:///{path}"
            self.database_kind = "sqlite"
        self.manage("migrate", "--noinput", "-v", "0")
        self.fixtures = self.django_json("bench.fixtures", "--agents", str(self.pick(20, 100, 1000)))

    def stop(self) -> None:
        for server in list(self._servers):
            self.stop_server(server)
        self._clean_redis()
        if self._private_redis and self._redis_pid_file and self._redis_pid_file.exists():
            pid = int(self._redis_pid_file.read_text().strip() or 0)
            if pid:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        if self.postgres:
            for database in (BENCH_DB, AUDIT_DB):
                try:
                    pg_drop(database)
                except Exception as exc:  # a leftover scratch DB is harmless; say so
                    print(f"warning: could not drop {database}: {exc}", file=sys.stderr)

    def _start_redis(self) -> None:
        url = os.environ.get("REDIS_URL", "")
        if url and redis_answers(url):
            self.redis_url = url
            return
        redis_server = shutil.which("redis-server")
        if redis_server is None:
            raise RuntimeError("no Redis: set REDIS_URL or install redis-server")
        port = free_port()
        redis_dir = self.work_dir / "redis"
        redis_dir.mkdir(parents=True, exist_ok=True)
        self._redis_pid_file = redis_dir / "redis.pid"
        subprocess.run(
            [
                redis_server,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(redis_dir),
                "--daemonize",
                "yes",
                "--pidfile",
                str(self._redis_pid_file),
                "--logfile",
                str(redis_dir / "redis.log"),
            ],
            check=True,
        )
        self._private_redis = True
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 10
        while not redis_answers(self.redis_url):
            if time.monotonic() > deadline:
                raise RuntimeError("the private Redis did not answer within 10 s")
            time.sleep(0.05)

    def _clean_redis(self) -> None:
        # Only this run's keys: a shared Redis may hold a colleague's data.
        if not self.redis_url or self._private_redis:
            return
        import redis

        try:
            client = redis.Redis.from_url(self.redis_url)
            for key in client.scan_iter(f"{self.redis_prefix}*"):
                client.delete(key)
        except Exception as exc:
            print(f"warning: could not remove this run's Redis keys: {exc}", file=sys.stderr)

    # --- subprocesses -------------------------------------------------------------------

    def child_env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="gatehouse.settings",
            DATABASE_URL=self.database_url,
            REDIS_URL=self.redis_url,
            GATEHOUSE_REDIS_PREFIX=self.redis_prefix,
            GATEHOUSE_BENCH="1",
            # Production-like: DEBUG would keep every SQL query in memory.
            DEBUG="0",
            LOG_LEVEL="WARNING",
            PYTHONUNBUFFERED="1",
            # The claim race, push and scale figures hold hundreds of asks of one agent
            # pending; the per-agent cap (200, a guard against a runaway agent) would deny
            # the rest and the figures would measure denials.
            GATEHOUSE_MAX_PENDING_PER_AGENT="100000",
        )
        env.update(extra)
        return env

    def manage(self, *args: str, **env: str) -> None:
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.child_env(**env), check=True)

    def django_json(self, module: str, *args: str, timeout: float = 1200, **env: str) -> Any:
        """Run `python -m module args --out FILE` in a fresh process; return the JSON it wrote."""
        out = self.work_dir / f"{module.rsplit('.', 1)[-1]}-{os.getpid()}.json"
        out.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", module, *args, "--out", str(out)]
        proc = subprocess.run(cmd, cwd=ROOT, env=self.child_env(**env), timeout=timeout, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{module} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        return json.loads(out.read_text())

    @contextmanager
    def server(self, kind: str = "daphne", **env: str) -> Iterator[Server]:
        server = self.start_server(kind, checkout=ROOT, **env)
        try:
            yield server
        finally:
            self.stop_server(server)

    def start_server(self, kind: str = "daphne", *, checkout: Path = ROOT, **env: str) -> Server:
        """A server of `checkout` (this one by default; `bench.ab` starts another's beside it)."""
        port = free_port()
        log_path = self.work_dir / f"{kind}-{port}.log"
        app = "gatehouse.asgi:application"
        if kind == "daphne":
            # Daphne as production runs it (`make run`, `make prod`, the systemd units).
            cmd = [str(BIN / "python"), "-m", "gatehouse.serve", "-b", "127.0.0.1", "-p", str(port), app]
        elif kind == "uvicorn":
            cmd = [
                str(BIN / "uvicorn"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-access-log",
                "--log-level",
                "warning",
                app,
            ]
        else:
            raise ValueError(f"unknown server {kind!r}")
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(
                cmd, cwd=checkout, env=self.child_env(**env), stdout=log_file, stderr=subprocess.STDOUT
            )
        server = Server(kind, port, process, log_path)
        self._servers.append(server)
        try:
            wait_for_port(port, process=process)
        except Exception:
            self.stop_server(server)
            raise
        return server

    def stop_server(self, server: Server) -> None:
        if server in self._servers:
            self._servers.remove(server)
        if server.process.poll() is None:
            server.process.terminate()
            try:
                server.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait(timeout=10)
