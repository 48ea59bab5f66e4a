"""A Telegram and a Slack bridge wired to fake services on 127.0.0.1, plus a running poller.

The bridges are registered as announcers exactly as `relay.wiring` does when the env
variables are set; only the URLs point at the fakes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.fakes.slack import FakeSlack, fake_slack
from tests.fakes.telegram import FakeTelegram, fake_telegram

CHAT_ID = "-100200300"
ALICE_TG = 111  # Alice's Telegram user id, listed in TELEGRAM_APPROVERS
STRANGER_TG = 666  # in the chat, not an approver
SLACK_CHANNEL = "C0APPROVALS"
ALICE_SLACK = "U0ALICE"
SIGNING_SECRET = "slack-signing-secret-for-tests"


@pytest.fixture
def fake_tg() -> Iterator[FakeTelegram]:
    with fake_telegram() as fake:
        yield fake


@pytest.fixture
def telegram_bridge(fake_tg: FakeTelegram, transactional_db: None) -> Iterator[Any]:
    from approvals.extensions import registry
    from relay.bridges.telegram import TelegramBridge, TelegramConfig

    config = TelegramConfig(
        token=fake_tg.token,
        chat_id=CHAT_ID,
        approvers=[str(ALICE_TG)],
        api_url=fake_tg.url,
        chat_interval=0.0,
        global_rate=1000,
    )
    bridge = TelegramBridge(config)
    registry.add_announcer(bridge)
    try:
        yield bridge
    finally:
        registry.announcers.remove(bridge)
        bridge.queue.wait_idle(10)
        bridge.queue.stop()


@pytest.fixture
def telegram_poller(telegram_bridge: Any) -> Iterator[Any]:
    from relay.bridges.telegram import TelegramPoller

    poller = TelegramPoller(telegram_bridge, poll_timeout=1, max_backoff=1)
    stop = threading.Event()
    thread = threading.Thread(target=poller.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield poller
    finally:
        stop.set()
        thread.join(10)


@pytest.fixture
def fake_sl() -> Iterator[FakeSlack]:
    with fake_slack() as fake:
        yield fake


@pytest.fixture
def slack_bridge(fake_sl: FakeSlack, transactional_db: None) -> Iterator[Any]:
    from approvals.extensions import registry
    from relay.bridges.slack import SlackBridge, SlackConfig

    config = SlackConfig(
        token=fake_sl.token,
        signing_secret=SIGNING_SECRET,
        channel=SLACK_CHANNEL,
        approvers=[ALICE_SLACK],
        api_url=fake_sl.url + "/api",
        channel_interval=0.0,
    )
    bridge = SlackBridge(config)
    registry.add_announcer(bridge)
    try:
        yield bridge
    finally:
        registry.announcers.remove(bridge)
        bridge.queue.wait_idle(10)
        bridge.queue.stop()


def ask(agent: Any, command: str = "rm -rf build", **extra: Any) -> Any:
    """Submit a Bash call the engine cannot decide (no rules, default mode): a pending ask."""
    from approvals import services

    call = {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": "s1", "cwd": "/repo", **extra}
    result = services.request_submit(agent=agent, call=call)
    assert result.decision is None, f"expected an ask, the engine said {result.decision}"
    return result.request


def decision_of(request: Any) -> Any:
    from approvals.models import Decision

    return Decision.objects.filter(request_id=request.pk, kind="decision").first()


def wait_until(predicate: Any, timeout: float = 15.0) -> Any:
    """Poll the database (where no doorbell rings) until `predicate()` is truthy."""
    import time

    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
    return value


class AgentCall:
    """An agent submitting one call over HTTP and waiting for the decision, in a thread."""

    def __init__(self, server_url: str, token: str, command: str, *, wait: int = 60) -> None:
        self.response: Any = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        body = {
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_use_id": f"tu-{command}",
            "session_id": "s1",
            "cwd": "/repo",
        }

        def run() -> None:
            import httpx

            try:
                self.response = httpx.post(
                    f"{server_url}/api/v1/permission-requests?wait={wait}",
                    json=body,
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=wait + 30,
                )
            except BaseException as exc:
                self.error = exc
            finally:
                self._done.set()

        threading.Thread(target=run, daemon=True).start()

    def result(self, timeout: float = 30) -> Any:
        assert self._done.wait(timeout), "the agent was not released in time"
        if self.error is not None:
            raise self.error
        return self.response


def slack_env(fake: FakeSlack) -> dict[str, Any]:
    return {
        "SLACK_BOT_TOKEN": fake.token,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_CHANNEL": SLACK_CHANNEL,
        "SLACK_APPROVERS": ALICE_SLACK,
        "SLACK_API_URL": fake.url + "/api",
        "SLACK_CHANNEL_INTERVAL_MS": "0",
    }


def telegram_env(fake: FakeTelegram) -> dict[str, Any]:
    return {
        "TELEGRAM_BOT_TOKEN": fake.token,
        "TELEGRAM_CHAT_ID": CHAT_ID,
        "TELEGRAM_APPROVERS": str(ALICE_TG),
        "TELEGRAM_API_URL": fake.url,
        "TELEGRAM_CHAT_INTERVAL_MS": "0",
    }


@contextmanager
def telegram_bot(fake: FakeTelegram, **extra: str) -> Iterator[Any]:
    """`python manage.py run_telegram_bot` against the fake, sharing the test database."""
    import subprocess
    import sys

    from tests.live import ROOT, server_env

    log_path = ROOT / "var" / "test-logs" / f"telegram-bot-{fake.url.rsplit(':', 1)[1]}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "run_telegram_bot", "--poll-timeout", "1"],
            cwd=ROOT,
            env=server_env(**telegram_env(fake), **extra),
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
