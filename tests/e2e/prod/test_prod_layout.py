"""The production layout as a team runs it: `make prod`, then everything through HTTPS.

PostgreSQL and Redis (private ones when none answer), Caddy with its internal CA in
front of two Daphne processes, the sweeper beside them. The test trusts Caddy's CA file
and nothing else, and reaches the processes only through the proxy. Then the Daphne
processes are restarted one at a time (`scripts/prod-restart.sh`) with asks pending and
agents connected and asking: every ask is answered exactly once. The Telegram bot runs
beside them and applies a press.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.datastructures import Headers

from agent.client import GatehouseClient, PendingPermission
from tests.e2e.claude_code.hookrun import finish, hook_input, start_hook
from tests.e2e.prod.layout import ProdLayout, drained_counts, make_prod
from tests.e2e.prod.postgres import fresh_database
from tests.fakes.telegram import FakeTelegram, fake_telegram
from tests.live import ROOT
from tests.relay.wsclient import of_type, receive_until, send

pytestmark = pytest.mark.slow

ALICE_PASSWORD = "alice-password-1"
AGENTS = 4
ASKS_EACH = 3
RESTART_TIMEOUT = 45.0
TELEGRAM_CHAT = "-100200300"
ALICE_TELEGRAM = 111  # listed in TELEGRAM_APPROVERS
HOOKS = 2

# Run by `manage.py shell` against the layout's database once it has migrated.
SETUP = f"""
import json
from django.contrib.auth import get_user_model
from approvals import services
ALICE_PASSWORD = {ALICE_PASSWORD!r}
AGENTS = {AGENTS}
team = services.default_team()
alice = get_user_model().objects.create_user(username="alice", password=ALICE_PASSWORD)
services.membership_set(user=alice, team=team, role="approver")
services.rule_create(rule="Bash(ls:*)", behavior="allow", source="projectSettings", team=team)
tokens = [services.agent_create(name=f"agent-{{n}}", team=team)[1] for n in range(AGENTS)]
print(json.dumps(tokens))
"""


@pytest.fixture(scope="module")
def fake_tg() -> Iterator[FakeTelegram]:
    with fake_telegram() as fake:
        yield fake


@pytest.fixture(scope="module")
def layout(redis_url: str, fake_tg: FakeTelegram) -> Iterator[ProdLayout]:
    telegram = {
        "TELEGRAM_BOT_TOKEN": fake_tg.token,
        "TELEGRAM_CHAT_ID": TELEGRAM_CHAT,
        "TELEGRAM_APPROVERS": str(ALICE_TELEGRAM),
        "TELEGRAM_API_URL": fake_tg.url,
        "TELEGRAM_CHAT_INTERVAL_MS": "0",
    }
    server = {
        "GATEHOUSE_ADMIN_PASSWORD": secrets.token_urlsafe(12),
        # A drain waits this long for requests in flight (a hook's long-poll), then cuts them.
        "GATEHOUSE_DRAIN_SECONDS": "3",
    }
    with fresh_database() as database_url, make_prod(database_url, redis_url, **telegram, **server) as running:
        # Agents, hooks and websockets in this process trust Caddy's CA through the
        # standard variable, as a team's agents would.
        previous = os.environ.get("SSL_CERT_FILE")
        os.environ["SSL_CERT_FILE"] = str(running.ca_file)
        try:
            yield running
        finally:
            if previous is None:
                os.environ.pop("SSL_CERT_FILE", None)
            else:
                os.environ["SSL_CERT_FILE"] = previous
    # Stopping `make prod` stopped everything it started: nothing listens any more.
    for port in (running.port, *running.web_ports):
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)


@pytest.fixture(scope="module")
def redis_url() -> str:
    url = os.environ.get("REDIS_URL")
    assert url, "tests need a real Redis: run them through `make test`, which starts one"
    return url


@pytest.fixture(scope="module")
def agent_tokens(layout: ProdLayout) -> list[str]:
    env = {**os.environ, "DATABASE_URL": layout.database_url, "DJANGO_SETTINGS_MODULE": "gatehouse.settings"}
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SETUP], cwd=ROOT, env=env, check=True, capture_output=True
    ).stdout
    return list(json.loads(out.decode().strip().splitlines()[-1]))


@asynccontextmanager
async def logged_in(layout: ProdLayout) -> AsyncIterator[httpx.AsyncClient]:
    """Alice in a browser: the real login form over HTTPS, then CSRF-protected calls."""
    async with httpx.AsyncClient(base_url=layout.url, verify=layout.ssl_context(), timeout=20) as browser:
        form = await browser.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert form.status_code == 200 and token, form.text[:500]
        response = await browser.post(
            "/accounts/login/",
            data={"username": "alice", "password": ALICE_PASSWORD, "csrfmiddlewaretoken": token.group(1)},
            headers={"Origin": layout.url, "Referer": f"{layout.url}/accounts/login/"},
        )
        assert response.status_code == 302, response.text[:500]
        assert browser.cookies.get("sessionid"), "no session cookie over HTTPS"
        browser.headers.update({"X-CSRFToken": browser.cookies["csrftoken"], "Origin": layout.url})
        yield browser


async def decide(browser: httpx.AsyncClient, request_id: str, behavior: str) -> None:
    response = await browser.post(f"/api/v1/permission-requests/{request_id}/decision", json={"behavior": behavior})
    assert response.status_code == 200, response.text


def dashboard(layout: ProdLayout, browser: httpx.AsyncClient) -> Any:
    cookies = "; ".join(f"{name}={value}" for name, value in browser.cookies.items())
    host = layout.url.removeprefix("https://")
    return connect(
        f"wss://{host}/ws/dashboard/",
        additional_headers=Headers({"Cookie": cookies}),
        origin=layout.url,  # type: ignore[arg-type]
        ssl=layout.ssl_context(),
        proxy=None,
    )


def request_id_of(layout: ProdLayout, tool_use_id: str, timeout: float = 30) -> str:
    """The id of the request a hook submitted, once it is in the database."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(layout.database_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT id::text FROM approvals_permissionrequest WHERE tool_use_id = %s", [tool_use_id]
            ).fetchone()
            if row:
                return str(row[0])
            time.sleep(0.05)
    raise AssertionError(f"the hook's request {tool_use_id} never arrived")


async def pushed_to(
    layout: ProdLayout, board: ClientConnection, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The dashboard's next frame matching `predicate`; if none comes, what the servers logged."""
    try:
        return await receive_until(board, predicate)
    except TimeoutError:
        said = [line for line in layout.log().splitlines() if re.search(r"WARNING|ERROR|CRITICAL|Traceback", line)]
        raise AssertionError("the dashboard never heard it; the servers logged:\n" + "\n".join(said[-40:])) from None


def restart_env(layout: ProdLayout) -> dict[str, str]:
    return {**os.environ, "GATEHOUSE_RUN_DIR": str(layout.run_dir), "BIN": str(Path(sys.executable).parent)}


def ask(command: str) -> dict[str, Any]:
    return {"tool_name": "Bash", "tool_input": {"command": command}, "session_id": "prod", "cwd": "/srv/project"}


class ProdLayoutTests:
    async def test_it_serves_logins_hooks_dashboards_and_agents_over_tls(
        self, layout: ProdLayout, agent_tokens: list[str]
    ) -> None:
        async with logged_in(layout) as browser:
            hook = await browser.post(
                "/hooks/claude-code",
                json={
                    "hook_event_name": "PreToolUse",
                    "session_id": "prod",
                    "cwd": "/srv/project",
                    "transcript_path": "",
                    "permission_mode": "default",
                    "tool_name": "Bash",
                    "tool_input": {"command": "ls -la"},
                    "tool_use_id": "toolu_prod_ls",
                },
                headers={"Authorization": f"Bearer {agent_tokens[0]}"},
            )
            assert hook.status_code == 200, hook.text
            assert hook.json()["hookSpecificOutput"]["permissionDecision"] == "allow"

            board: ClientConnection
            async with dashboard(layout, browser) as board, GatehouseClient(layout.url, agent_tokens[0]) as agent:
                await send(board, {"type": "subscribe"})
                await receive_until(board, of_type("snapshot"))
                assert agent.mode == "websocket"
                handle = await agent.submit(ask("rm -rf build"))
                request_id = await asyncio.wait_for(handle.accepted(), 20)
                pushed = await pushed_to(layout, board, of_type("request.created", id=request_id))
                assert "card-pending" in pushed["html"]
                await decide(browser, request_id, "deny")
                decision = await asyncio.wait_for(handle.decision(), 20)
                assert decision.behavior == "deny"
                await pushed_to(layout, board, of_type("request.decided", id=request_id))

    async def test_it_runs_the_telegram_bot_beside_the_servers(
        self, layout: ProdLayout, agent_tokens: list[str], fake_tg: FakeTelegram
    ) -> None:
        # A web process posts the card; only the bot process (getUpdates) applies the press.
        async with GatehouseClient(layout.url, agent_tokens[1]) as agent:
            handle = await agent.submit(ask("kubectl delete pod web-1"))
            card = await asyncio.to_thread(fake_tg.wait_for, lambda: fake_tg.card_for("kubectl delete pod web-1"))
            fake_tg.press(card, "Allow once", user_id=ALICE_TELEGRAM)
            decision = await asyncio.wait_for(handle.decision(), 30)
        assert (decision.behavior, decision.surface) == ("allow", "telegram")

    async def test_it_restarts_a_process_without_losing_or_doubling_an_ask(
        self, layout: ProdLayout, agent_tokens: list[str]
    ) -> None:
        async with logged_in(layout) as browser:
            clients = [GatehouseClient(layout.url, token, backoff_max=1.0) for token in agent_tokens]
            try:
                for client in clients:
                    await client.start()
                    assert client.mode == "websocket"
                handles = await self._asks(clients, "before")
                hooks = await self._hooks_waiting(layout, agent_tokens[0])
                old_pids = [layout.web_pid(n) for n in (1, 2)]
                # The rolling restart make prod documents: each process in turn drains,
                # and its successor is ready before the next one goes.
                restart = await asyncio.create_subprocess_exec(
                    str(ROOT / "scripts" / "prod-restart.sh"),
                    env=restart_env(layout),
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                )
                # Agents keep asking while the processes drain and come back.
                handles += await self._asks(clients, "during")
                said, _ = await asyncio.wait_for(restart.communicate(), RESTART_TIMEOUT)
                assert restart.returncode == 0, said.decode()
                assert all(layout.web_pid(n) != old for n, old in zip((1, 2), old_pids, strict=True))
                handles += await self._asks(clients, "after")
                assert not any(h.done for h in handles), "an ask was decided by the restart"
                expected: dict[str, str] = {}
                for n, handle in enumerate(handles):
                    expected[str(handle.id)] = "allow" if n % 2 else "deny"
                    await decide(browser, str(handle.id), expected[str(handle.id)])
                heard = await asyncio.wait_for(asyncio.gather(*(h.decision() for h in handles)), 30)
                reconnects = [client.reconnects for client in clients]
                for request_id in hooks:
                    await decide(browser, request_id, "allow")
                for request_id, process in hooks.items():
                    code, out, err = await asyncio.to_thread(finish, process, 30)
                    assert code == 0 and out["hookSpecificOutput"]["permissionDecision"] == "allow", (request_id, err)
            finally:
                for client in clients:
                    await client.close()
        assert {d.request_id: d.behavior for d in heard} == expected
        assert all(count >= 1 for count in reconnects), f"an agent was never moved: {reconnects}"
        assert sum(drained_counts(layout.log())) >= AGENTS, layout.log()[-3000:]
        self._assert_exactly_once(layout, [*expected, *hooks])

    @staticmethod
    async def _asks(clients: list[GatehouseClient], stage: str) -> list[PendingPermission]:
        handles = [
            await client.submit(ask(f"rm -rf {stage}/{n}/{k}"))
            for n, client in enumerate(clients)
            for k in range(ASKS_EACH if stage == "before" else 1)
        ]
        await asyncio.wait_for(asyncio.gather(*(h.accepted() for h in handles)), RESTART_TIMEOUT)
        return handles

    @staticmethod
    async def _hooks_waiting(layout: ProdLayout, token: str) -> dict[str, subprocess.Popen[str]]:
        """Real hook commands, each long-polling through the proxy for an ask; by request id.

        The layout drains for GATEHOUSE_DRAIN_SECONDS=3: a hook whose wait is on a
        restarting process is cut, gets a 502 from the proxy and retries elsewhere.
        """
        hooks: dict[str, subprocess.Popen[str]] = {}
        for n in range(HOOKS):
            body = hook_input("PreToolUse", f"rm -rf hook-{n}", session="prod-hooks")
            process = start_hook(layout.url, token, body, SSL_CERT_FILE=str(layout.ca_file))
            hooks[await asyncio.to_thread(request_id_of, layout, body["tool_use_id"])] = process
        return hooks

    @staticmethod
    def _assert_exactly_once(layout: ProdLayout, request_ids: list[str]) -> None:
        with psycopg.connect(layout.database_url) as conn:
            doubled = conn.execute(
                "SELECT agent_id, tool_use_id FROM approvals_permissionrequest"
                " GROUP BY agent_id, tool_use_id HAVING count(*) > 1"
            ).fetchall()
            rows = conn.execute(
                "SELECT r.id::text, r.state, count(d.id) FROM approvals_permissionrequest r"
                " LEFT JOIN approvals_decision d ON d.request_id = r.id GROUP BY r.id, r.state"
            ).fetchall()
        # One request row per ask (a re-sent ask or a retried hook was replayed) ...
        assert doubled == []
        by_id = {row[0]: (row[1], row[2]) for row in rows}
        # ... and one audit row each.
        assert all(by_id[i] == ("decided", 1) for i in request_ids), by_id


class MakeProdRefusalTests:
    @pytest.mark.parametrize(
        ("given", "named"),
        [
            ({}, "DATABASE_URL REDIS_URL"),
            ({"REDIS_URL": "redis://127.0.0.1:6379/0"}, "DATABASE_URL"),
            ({"DATABASE_URL": "postgres://127.0.0.1/gatehouse"}, "REDIS_URL"),
        ],
    )
    def test_it_names_what_is_missing(self, given: dict[str, str], named: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        result = subprocess.run(
            ["make", "--no-print-directory", "prod", f"VENV={Path(sys.executable).parent.parent}"],
            cwd=ROOT,
            env={**env, **given},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode != 0
        assert f"make prod needs {named} (PostgreSQL and Redis)" in result.stderr
        assert "caddy" not in result.stdout.lower()  # refused before starting anything
