"""Personas shared by the whole suite, and the real services tests run against.

Alice approves in the default team, Bob only views it, Carol is its team admin, Mallory
belongs to another team, and `ci-bot` is the default team's agent.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """Give this run its own test database, so two runs on one machine never collide."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    suffix = f"_{os.getpid()}"
    if db["ENGINE"].endswith("sqlite3"):
        db.setdefault("TEST", {})["NAME"] = str(settings.VAR_DIR / f"test{suffix}.sqlite3")
    else:
        db.setdefault("TEST", {})["NAME"] = f"test_gatehouse{suffix}"
        # The test process is no server: a pool would only keep connections to the test
        # database open when it is dropped. The servers the tests start keep their pool.
        db.get("OPTIONS", {}).pop("pool", None)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's test database, dropped at the end even if a thread left a session open.

    Django closes only the main thread's connection before `DROP DATABASE`; a worker
    thread's last connection (a racer, a `sync_to_async` call) kept the drop from
    happening, and each PostgreSQL run left its `test_gatehouse_<pid>` behind.
    """
    yield
    from django.db import connection

    if connection.vendor == "postgresql":
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        connection.close()


# SQLSTATEs of a lock cycle PostgreSQL broke, and of a lock wait past lock_timeout.
_LOCK_CONFLICTS = frozenset({"40P01", "55P03"})


@pytest.fixture(scope="session", autouse=True)
def _flush_outlasts_lock_conflicts() -> Iterator[None]:
    """Retry the TRUNCATE that empties the database after each transactional test.

    It takes its tables' locks one by one; a live server on the same database (its 1 s
    sweeper, a racer) may be running a join that takes them in another order, and
    PostgreSQL then fails one of the two. When that was the TRUNCATE, the test errored in
    teardown and the next one started on its rows. The server retries on its next sweep;
    the flush retries here. Only tests truncate, so only tests need this.
    """
    from collections.abc import Iterable

    from django.db import OperationalError
    from django.db.backends.base.operations import BaseDatabaseOperations
    from django.db.backends.postgresql.operations import DatabaseOperations

    original = DatabaseOperations.execute_sql_flush

    def execute_sql_flush(self: BaseDatabaseOperations, sql_list: Iterable[str]) -> None:
        sql_list = list(sql_list)
        for attempt in range(1, 6):
            try:
                return original(self, sql_list)
            except OperationalError as exc:
                if attempt == 5 or getattr(exc.__cause__, "sqlstate", None) not in _LOCK_CONFLICTS:
                    raise

    DatabaseOperations.execute_sql_flush = execute_sql_flush  # type: ignore[method-assign]
    yield
    DatabaseOperations.execute_sql_flush = original  # type: ignore[method-assign]


@dataclass
class AgentPersona:
    agent: Any
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"HTTP_AUTHORIZATION": f"Bearer {self.token}"}


@pytest.fixture
def default_team(db: None) -> Any:
    from approvals import services

    return services.default_team()


@pytest.fixture
def other_team(db: None) -> Any:
    from approvals.models import Team

    return Team.objects.get_or_create(name="other")[0]


@functools.cache
def password_hash(password: str) -> str:
    """A real PBKDF2 hash of `password`, made once per test process.

    Django hashes with 1,000,000 iterations, about 0.2 s of CPU each: hashing every
    persona's password in every test was a large share of the suite's CPU. The hash is
    the real one, so a login through a live server still checks it.
    """
    from django.contrib.auth.hashers import make_password

    return make_password(password)


def _person(username: str, team: Any, role: str | None) -> Any:
    from django.contrib.auth import get_user_model

    from approvals import services

    user = get_user_model().objects.create(username=username, password=password_hash(f"{username}-password-1"))
    if role is not None:
        services.membership_set(user=user, team=team, role=role)
    return user


@pytest.fixture
def alice(default_team: Any) -> Any:
    """Alice approves requests in the default team."""
    return _person("alice", default_team, "approver")


@pytest.fixture
def bob(default_team: Any) -> Any:
    """Bob can watch the default team's queue but not decide."""
    return _person("bob", default_team, "viewer")


@pytest.fixture
def carol(default_team: Any) -> Any:
    """Carol is the default team's admin: she decides and manages its people and settings."""
    return _person("carol", default_team, "admin")


@pytest.fixture
def mallory(other_team: Any) -> Any:
    """Mallory approves in another team and must see nothing of the default one."""
    return _person("mallory", other_team, "approver")


@pytest.fixture
def admin(default_team: Any) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create(
        username="root", password=password_hash("root-password-1"), is_staff=True, is_superuser=True
    )


@pytest.fixture
def ci_bot(default_team: Any) -> AgentPersona:
    """The default team's agent."""
    from approvals import services

    agent, token = services.agent_create(name="ci-bot", team=default_team)
    return AgentPersona(agent, token)


@pytest.fixture
def registered_agent(default_team: Any) -> Any:
    """Register a default-team agent with a given mode (an agent never exceeds its registration)."""
    from approvals import services

    def register(name: str, mode: str) -> AgentPersona:
        agent, token = services.agent_create(name=name, team=default_team, mode=mode)
        return AgentPersona(agent, token)

    return register


@pytest.fixture
def other_bot(other_team: Any) -> AgentPersona:
    """Another team's agent."""
    from approvals import services

    agent, token = services.agent_create(name="other-bot", team=other_team)
    return AgentPersona(agent, token)


@pytest.fixture
def redis_url() -> str:
    url = os.environ.get("REDIS_URL")
    assert url, "tests need a real Redis: run them through `make test`, which starts one"
    return url


@pytest.fixture
def clean_redis(redis_url: str) -> Iterator[Any]:
    """A Redis client; this run's keys are removed afterwards."""
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    prefix = os.environ["GATEHOUSE_REDIS_PREFIX"]
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)


# Suites whose outcome depends on the database engine: its SQL (the audit chain's lock
# and append-only triggers, the rules-version trigger, the monitor's aggregates, text
# search, unique constraints), its transactions, its connection pool and its concurrency
# (the fence, the race, long polls, crashes and restarts). `make test` runs them a second
# time on PostgreSQL; the rest drives the same server code through the same ORM and runs
# once, on SQLite.
DB_ENGINE_SUITES = (
    "tests/approvals/test_api_audit.py",
    "tests/approvals/test_audit_before_release.py",
    "tests/approvals/test_audit_archive.py",
    "tests/approvals/test_audit_chain.py",
    "tests/approvals/test_audit_checkpoints.py",
    "tests/approvals/test_audit_coverage.py",
    "tests/approvals/test_decide_statements.py",
    "tests/approvals/test_api_decide.py",
    "tests/approvals/test_api_long_poll.py",
    "tests/approvals/test_api_rules.py",
    "tests/approvals/test_api_submit.py",
    "tests/approvals/test_approver_analytics.py",
    "tests/approvals/test_denials_monitor.py",
    "tests/approvals/test_events.py",
    "tests/approvals/test_likeness_migration.py",
    # "Since last allowed": one statement, written by hand, sent with the card's read.
    "tests/approvals/test_pages_card_since.py",
    "tests/approvals/test_rules_cache.py",
    "tests/approvals/test_submit_statements.py",
    "tests/approvals/test_what_if.py",
    "tests/approvals/test_written.py",
    "tests/approvals/test_waiting.py",
    "tests/relay/test_claims.py",
    # An ask's card read in the ask's own message, rendered by the thread that committed it.
    "tests/relay/test_gathered.py::CardReadWhereCommittedTests",
    "tests/relay/test_deadlines.py",
    "tests/relay/test_multiprocess.py",
    "tests/relay/test_quorum_race.py",
    "tests/relay/test_race.py",
    "tests/relay/test_webhooks_cache.py",
    "tests/reliability/",
)

# Smoke runs of the benchmark and soak scripts: they prove the scripts still run, not
# that the product works, so `make test` leaves them to `make test-all`.
SCRIPT_SMOKE_SUITES = (
    "tests/bench/test_bench_smoke.py::HarnessTests",
    "tests/reliability/test_soak_smoke.py",
)


# Marks of the suites that take longest (live servers killed and restarted, Chromium, the
# Claude Code CLI): in a parallel run they start first, so the workers finish together
# instead of one of them working alone through a long tail.
LONG_MARKS = ("slow", "browser", "claude_cli")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    long_files = {item.path for item in items if any(item.get_closest_marker(mark) for mark in LONG_MARKS)}
    items.sort(key=lambda item: item.path not in long_files)  # stable: each file keeps its order
    for item in items:
        if item.nodeid.startswith(DB_ENGINE_SUITES):
            item.add_marker(pytest.mark.db_engine)
        if item.nodeid.startswith(SCRIPT_SMOKE_SUITES):
            item.add_marker(pytest.mark.script_smoke)


# `GATEHOUSE_TEST_TIMELINE=DIR` writes when each test ran on which worker (one JSON line
# a test, one file a worker): what keeps a parallel run from finishing sooner.
TIMELINE = os.environ.get("GATEHOUSE_TEST_TIMELINE")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    started = time.time()
    yield
    if TIMELINE:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        line = {"worker": worker, "test": item.nodeid, "start": started, "end": time.time()}
        with open(os.path.join(TIMELINE, f"{worker}-{os.getpid()}.jsonl"), "a") as out:
            out.write(json.dumps(line) + "\n")
