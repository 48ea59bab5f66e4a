"""`?wait=` long-polls on a real Daphne server: released by the decision, never blocking others."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from approvals import services
from approvals.models import PermissionRequest
from tests.approvals.conftest import ASK_CALL
from tests.e2e.claude_code.hookrun import hook_input
from tests.live import LiveServer, live_server

URL = "/api/v1/permission-requests"


@pytest.fixture
def server(transactional_db: None) -> Iterator[LiveServer]:
    with live_server() as srv:
        yield srv


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wait_for_request(tool_use_id: str, timeout: float = 20.0) -> PermissionRequest:
    """The pending request once the server has stored it (polls the shared database)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = PermissionRequest.objects.filter(tool_use_id=tool_use_id).first()
        if found is not None:
            return found
        threading.Event().wait(0.02)
    raise AssertionError(f"the server never stored {tool_use_id}")


@pytest.mark.django_db(transaction=True)
class LongPollTests:
    def test_it_answers_200_as_soon_as_a_person_decides(self, server: LiveServer, ci_bot: Any, alice: Any) -> None:
        alice_token = services.personal_token_create(user=alice)
        with ThreadPoolExecutor(max_workers=1) as pool, httpx.Client(base_url=server.url, timeout=60) as http:
            started = time.monotonic()
            waiting: Future[httpx.Response] = pool.submit(
                http.post, f"{URL}?wait=30", json={**ASK_CALL, "tool_use_id": "lp1"}, headers=bearer(ci_bot.token)
            )
            request = wait_for_request("lp1")
            decided = http.post(f"{URL}/{request.pk}/decision", json={"behavior": "allow"}, headers=bearer(alice_token))
            assert decided.status_code == 200, decided.text
            response = waiting.result(timeout=30)
            elapsed = time.monotonic() - started
        assert response.status_code == 200, response.text
        assert response.json()["decision"]["decided_by"] == "alice"
        assert elapsed < 15, "released by the decision, not by the wait running out"

    def test_it_answers_202_when_the_wait_runs_out(self, server: LiveServer, ci_bot: Any) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            started = time.monotonic()
            response = http.post(f"{URL}?wait=1", json={**ASK_CALL, "tool_use_id": "lp2"}, headers=bearer(ci_bot.token))
            elapsed = time.monotonic() - started
            assert response.status_code == 202
            assert response.json()["status"] == "pending"
            assert 0.9 < elapsed < 10
            again = http.get(f"{URL}/{response.json()['id']}?wait=0.5", headers=bearer(ci_bot.token))
            assert again.status_code == 202

    def test_it_releases_a_get_long_poll_on_cancel_elsewhere(self, server: LiveServer, ci_bot: Any) -> None:
        request = services.request_submit(agent=ci_bot.agent, call={**ASK_CALL, "tool_use_id": "lp3"}).request
        with ThreadPoolExecutor(max_workers=1) as pool, httpx.Client(base_url=server.url, timeout=60) as http:
            waiting = pool.submit(http.get, f"{URL}/{request.pk}?wait=30", headers=bearer(ci_bot.token))
            cancelled = http.post(f"{URL}/{request.pk}/cancel", json={}, headers=bearer(ci_bot.token))
            assert cancelled.status_code == 200
            response = waiting.result(timeout=30)
        assert response.status_code == 200
        assert response.json()["status"] == "cancelled"
        assert response.json()["decision"]["behavior"] == "deny"

    def test_it_serves_other_requests_while_many_agents_wait(self, server: LiveServer, ci_bot: Any) -> None:
        waiters = 6
        with ThreadPoolExecutor(max_workers=waiters) as pool, httpx.Client(base_url=server.url, timeout=60) as http:
            futures = [
                pool.submit(
                    http.post,
                    f"{URL}?wait=20",
                    json={**ASK_CALL, "tool_use_id": f"many{index}"},
                    headers=bearer(ci_bot.token),
                )
                for index in range(waiters)
            ]
            for index in range(waiters):
                wait_for_request(f"many{index}")
            # Every agent is now parked in a long-poll; sync views must still answer at once.
            started = time.monotonic()
            for _ in range(5):
                assert http.get("/api/v1/health", headers=bearer(ci_bot.token)).status_code == 200
            elapsed = time.monotonic() - started
            for request in PermissionRequest.objects.filter(tool_use_id__startswith="many"):
                services.request_cancel(request=request)
            statuses = [future.result(timeout=30).status_code for future in futures]
        assert elapsed < 5, f"5 health checks took {elapsed:.1f}s while agents waited"
        assert statuses == [200] * waiters

    def test_it_streams_a_csv_export_through_daphne(self, server: LiveServer, ci_bot: Any, alice: Any) -> None:
        for index in range(3):
            services.request_submit(agent=ci_bot.agent, call={"tool_name": "TaskList", "tool_use_id": f"x{index}"})
        token = services.personal_token_create(user=alice)
        with (
            httpx.Client(base_url=server.url, timeout=30) as http,
            http.stream("GET", "/api/v1/audit?format=csv", headers=bearer(token)) as response,
        ):
            assert response.status_code == 200
            assert response.headers.get("content-length") is None  # streamed, not buffered
            lines = "".join(response.iter_text()).splitlines()
        assert len(lines) == 4
        assert lines[0].startswith("id,created_at,request_id")

    def test_it_refuses_oversized_bodies_through_daphne_even_chunked(self, server: LiveServer, ci_bot: Any) -> None:
        big = b'{"tool_name": "Bash", "tool_input": {"command": "' + b"x" * (2 * 1024 * 1024) + b'"}}'

        def chunks() -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding: chunked
            for start in range(0, len(big), 64 * 1024):
                yield big[start : start + 64 * 1024]

        headers = {**bearer(ci_bot.token), "Content-Type": "application/json"}
        with httpx.Client(base_url=server.url, timeout=30) as http:
            sized = http.post(URL, content=big, headers=headers)
            chunked = http.post(URL, content=chunks(), headers=headers)
        assert (sized.status_code, chunked.status_code) == (413, 413), (sized.text, chunked.text)
        assert chunked.json()["error"]["code"] == "payload_too_large"
        assert not PermissionRequest.objects.exists()

    def test_it_reads_a_small_chunked_body(self, server: LiveServer, ci_bot: Any) -> None:
        body = json.dumps({**ASK_CALL, "tool_use_id": "chunky"}).encode()
        headers = {**bearer(ci_bot.token), "Content-Type": "application/json"}
        with httpx.Client(base_url=server.url, timeout=30) as http:
            response = http.post(URL, content=iter([body[:10], body[10:]]), headers=headers)
        assert response.status_code == 202, response.text
        assert response.json()["tool_use_id"] == "chunky"


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_waiting_agents_hold_no_database_connection(ci_bot: Any, alice: Any) -> None:
    """More agents wait (REST and the hook) than the pool has connections; the server still answers.

    A waiting request keeps its own worker thread but gives its connection back to the
    pool before it waits: were it held, the third waiter would find the pool of two
    empty and everything after it would fail after the pool's timeout.
    """
    waiters = 3
    alice_token = services.personal_token_create(user=alice)
    with (
        live_server(DB_POOL_MIN="1", DB_POOL_MAX="2", DB_POOL_TIMEOUT="3") as srv,
        ThreadPoolExecutor(max_workers=2 * waiters) as pool,
        httpx.Client(base_url=srv.url, timeout=60) as http,
    ):
        rest = [
            pool.submit(
                http.post, f"{URL}?wait=30", json={**ASK_CALL, "tool_use_id": f"pool{i}"}, headers=bearer(ci_bot.token)
            )
            for i in range(waiters)
        ]
        inputs = [hook_input("PreToolUse", f"rm -rf build{i}") for i in range(waiters)]
        hooks = [
            pool.submit(http.post, "/hooks/claude-code?wait=30", json=body, headers=bearer(ci_bot.token))
            for body in inputs
        ]
        for i in range(waiters):
            wait_for_request(f"pool{i}")
            wait_for_request(inputs[i]["tool_use_id"])
        health = [http.get("/api/v1/health", headers=bearer(ci_bot.token)).status_code for _ in range(3)]
        submitted = http.post(f"{URL}", json={**ASK_CALL, "tool_use_id": "pool-late"}, headers=bearer(ci_bot.token))
        denials = [
            http.post(
                f"{URL}/{request.pk}/decision", json={"behavior": "deny"}, headers=bearer(alice_token)
            ).status_code
            for request in PermissionRequest.objects.filter(state="pending")
        ]
        rest_statuses = [future.result(timeout=30).status_code for future in rest]
        hook_answers = [future.result(timeout=30).json() for future in hooks]
    assert health == [200, 200, 200]
    assert submitted.status_code == 202, submitted.text
    assert denials == [200] * (2 * waiters + 1)
    assert rest_statuses == [200] * waiters
    decisions = [answer["hookSpecificOutput"]["permissionDecision"] for answer in hook_answers]
    assert decisions == ["deny"] * waiters, hook_answers
