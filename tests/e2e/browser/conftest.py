"""Real Chromium (Debian's, never a downloaded one) against a real Daphne server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.live import LiveServer, live_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# A bound for any event a page waits for (a request pushed, a vote, a card greyed out):
# long enough for a loaded 2-core machine, where 5 s was once too short; never a pause.
# How fast a push arrives is measured by `make bench` (figure 5), not asserted here.
EVENT_TIMEOUT_MS = 15_000


def launch(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    import os

    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium package")
    # Playwright's sync API runs an event loop in this thread, and Django then refuses
    # ORM calls from the test body. Only the test process is exempted: the server under
    # test gets the variable cleared (see `server`), so its own async bugs still show.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = launch(playwright)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveServer]:
    """One server for a module's tests; each test's data is flushed after it (transaction=True)."""
    with django_db_blocker.unblock(), live_server(DJANGO_ALLOW_ASYNC_UNSAFE="") as srv:
        yield srv


def session_cookie(user: Any) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return str(client.cookies["sessionid"].value)


@pytest.fixture
def page_for(browser: Any, server: LiveServer) -> Iterator[Callable[..., Any]]:
    """Open a logged-in page for a person; CSP violations and script errors fail the test."""
    contexts: list[Any] = []
    problems: list[str] = []

    def open_page(user: Any, path: str = "/", *, width: int = 1280, height: int = 900) -> Any:
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        context.add_cookies([{"name": "sessionid", "value": session_cookie(user), "url": server.url}])
        page = context.new_page()
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.on("console", lambda msg: _console(msg, problems))
        page.on("response", lambda r: problems.append(f"{r.status} {r.url}") if r.status == 404 else None)
        page.goto(server.url + path)
        return page

    yield open_page
    for context in contexts:
        context.close()
    assert not problems, f"the browser reported problems: {problems}"


def _console(message: Any, problems: list[str]) -> None:
    # A failed fetch is reported by URL from the response hook; tests provoke 403/409 on purpose.
    if message.type == "error" and not message.text.startswith("Failed to load resource"):
        problems.append(f"console {message.type}: {message.text}")


def wait_live(page: Any) -> None:
    """Wait until the queue's socket has subscribed (so a push cannot be missed).

    A bound, not a pause: on a loaded 2-core machine (a full `make test` beside other
    work) the page, its socket and the snapshot took more than 10 s once.
    """
    page.wait_for_selector('#live[data-state="live"]', timeout=30_000)


def in_thread(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a service call off this thread: Playwright's event loop owns it, and the
    services announce through `async_to_sync`, which refuses to run beside a live loop."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    def call() -> Any:
        try:
            return func(*args, **kwargs)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result(timeout=60)


def ask(agent: Any, command: str = "rm -rf build", **extra: Any) -> Any:
    from approvals import services

    call = {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": "s1", "cwd": "/tmp/proj", **extra}
    result = in_thread(services.request_submit, agent=agent, call=call)
    assert result.decision is None, "with no rules the engine must ask"
    return result.request
