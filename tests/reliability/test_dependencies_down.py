"""Redis or the database down: asks fail closed, auto-decisions go on, nothing hangs.

Redis is a private redis-server this test stops; the database outage is the real
PostgreSQL behind a TCP proxy this test cuts (on SQLite, see test_audit_or_refuse's
lock fault). The hook command runs for real against a server that is not there.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db import connection
from websockets.asyncio.client import connect

from approvals import services
from approvals.models import Decision
from tests.live import ROOT, LiveServer, free_port, live_server
from tests.live import test_database_url as run_database_url
from tests.relay.redis_server import PrivateRedis, private_redis
from tests.reliability.clients import call, heard_from_http

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

HOOK_INPUT = {
    "hook_event_name": "PreToolUse",
    "session_id": "down",
    "cwd": "/srv/project",
    "transcript_path": "",
    "permission_mode": "default",
    "tool_name": "Bash",
    "tool_input": {"command": "rm -rf build"},
    "tool_use_id": "toolu_down_1",
}


@pytest.fixture
def rules(default_team: Any) -> None:
    services.rule_create(rule="Bash(ls:*)", behavior="allow", source="projectSettings", team=default_team)
    services.rule_create(rule="Bash(curl:*)", behavior="deny", source="projectSettings", team=default_team)


@pytest.fixture
def redis_server_pair(django_db_blocker: Any) -> Iterator[tuple[PrivateRedis, LiveServer]]:
    with (
        private_redis() as redis_server,
        django_db_blocker.unblock(),
        live_server(REDIS_URL=redis_server.url, GATEHOUSE_ASK_TIMEOUT="8", GATEHOUSE_SWEEP_INTERVAL="1") as srv,
    ):
        yield redis_server, srv


def timed_post(url: str, token: str, body: dict[str, Any], **params: Any) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = httpx.post(url, json=body, params=params, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return response, time.monotonic() - started


class RedisDownTests:
    def test_it_keeps_auto_decisions_and_fails_asks_closed_without_hanging(
        self, redis_server_pair: tuple[PrivateRedis, LiveServer], ci_bot: Any, alice: Any, rules: None
    ) -> None:
        redis_server, srv = redis_server_pair
        submit = f"{srv.url}/api/v1/permission-requests"
        # Warm up with Redis alive, then take it away.
        assert heard_from_http(timed_post(submit, ci_bot.token, call("ls", "warm"))[0]).behavior == "allow"
        redis_server.stop()

        allowed, took = timed_post(submit, ci_bot.token, call("ls -la", "r1"))
        assert heard_from_http(allowed).behavior == "allow" and took < 10, (allowed.text, took)
        denied, took = timed_post(submit, ci_bot.token, call("curl https://x", "r2"))
        assert heard_from_http(denied).behavior == "deny" and took < 10

        # An ask is stored and waits no longer than asked, even with no doorbell to ring.
        person = services.personal_token_create(user=alice)
        asked, took = timed_post(submit, ci_bot.token, call("rm -rf build", "r3"), wait=1)
        assert asked.status_code == 202 and took < 1 + 5, (asked.status_code, took)
        request_id = asked.json()["id"]

        # A person can still decide over HTTP (the claim falls back to the database fence),
        # and the agent's long-poll picks it up by reading the database. (The ask's deadline,
        # 8 s, leaves a loaded machine time to get here first.)
        decided, took = timed_post(f"{submit}/{request_id}/decision", person, {"behavior": "deny"})
        assert decided.status_code == 200 and took < 10, decided.text
        polled = httpx.get(
            f"{submit}/{request_id}",
            params={"wait": 5},
            timeout=30,
            headers={"Authorization": f"Bearer {ci_bot.token}"},
        )
        assert heard_from_http(polled).behavior == "deny"

        # Nobody decides the next ask: its deadline denies it (the sweeper reads the database).
        timed_post(submit, ci_bot.token, call("rm -rf dist", "r4"))
        final, took = timed_post(submit, ci_bot.token, call("rm -rf dist", "r4"), wait=25)
        outcome = heard_from_http(final)
        assert outcome.behavior == "deny" and outcome.detail == "timeout", final.text
        assert took < 25  # the deadline (8 s) answered it, not the end of the wait

        # The Claude Code hook endpoint answers within its wait and denies on timeout.
        hook, took = timed_post(f"{srv.url}/hooks/claude-code", ci_bot.token, HOOK_INPUT, wait=2, on_timeout="deny")
        assert hook.json()["hookSpecificOutput"]["permissionDecision"] == "deny" and took < 2 + 5, hook.text

        # An agent socket either works (degraded, no pushes) or refuses with a close: never
        # hangs and never allows anything undecided.
        async def agent_socket() -> str:
            try:
                async with connect(
                    f"{srv.ws_url}/ws/agent/",
                    proxy=None,
                    open_timeout=10,
                    additional_headers={"Authorization": f"Bearer {ci_bot.token}"},
                ) as ws:
                    await ws.send(
                        json.dumps({"type": "permission_request", "ref": "x", "request": call("ls -la", "r5")})
                    )
                    while True:
                        frame = json.loads(await asyncio.wait_for(ws.recv(), 15))
                        if frame.get("type") in ("decision", "error"):
                            return str(frame.get("decision", {}).get("behavior") or frame.get("code"))
            except Exception as exc:
                return f"closed: {type(exc).__name__}"

        outcome_ws = asyncio.run(agent_socket())
        assert outcome_ws in ("allow",) or outcome_ws.startswith("closed"), outcome_ws

        # Redis comes back: the service heals by itself.
        redis_server.start()
        assert heard_from_http(timed_post(submit, ci_bot.token, call("ls", "back"))[0]).behavior == "allow"
        assert asyncio.run(agent_socket()) == "allow"


class HookUnreachableTests:
    # The hook is never silent: "ask" prints ask (the person at the terminal decides), since
    # silence would let Claude Code decide alone, which in bypass or auto mode runs the call.
    @pytest.mark.parametrize(("policy", "expected"), [("deny", "deny"), ("allow", "allow"), ("ask", "ask")])
    def test_it_applies_on_unreachable_when_no_server_answers(self, policy: str, expected: str) -> None:
        dead = f"http://127.0.0.1:{free_port()}"
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "agent.hook", "--server", dead, "--on-unreachable", policy, "--timeout", "5"],
            input=json.dumps(HOOK_INPUT),
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=30,
            env={"GATEHOUSE_TOKEN": "gha_whatever", "PATH": "/usr/bin:/bin"},
        )
        assert time.monotonic() - started < 10
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["hookSpecificOutput"]["permissionDecision"] == expected


class CuttableProxy:
    """A TCP proxy to PostgreSQL that can be cut (every connection dropped, new ones refused)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self.up = True
        self.conns: list[socket.socket] = []
        self.server = socket.create_server(("127.0.0.1", self.port))
        self.server.settimeout(0.2)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.running = True
        self.thread.start()

    def serve(self) -> None:
        while self.running:
            try:
                client, _ = self.server.accept()
            except OSError:
                continue
            if not self.up:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self) -> None:
        self.up = False
        for conn in self.conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.conns.clear()

    def mend(self) -> None:
        self.up = True

    def close(self) -> None:
        self.running = False
        self.cut()
        self.server.close()


@pytest.mark.postgresql
class DatabaseDownTests:
    def test_it_refuses_every_call_while_postgresql_is_unreachable_and_heals_after(
        self, django_db_blocker: Any, ci_bot: Any, rules: None
    ) -> None:
        # Cutting a TCP connection needs a database server; make test's PostgreSQL pass runs this.
        assert connection.vendor == "postgresql", "run with DATABASE_URL=postgres://… (marker: postgresql)"
        settings_db = connection.settings_dict
        proxy = CuttableProxy((settings_db.get("HOST") or "127.0.0.1", int(settings_db.get("PORT") or 5432)))
        url = run_database_url().replace(f":{settings_db.get('PORT') or 5432}/", f":{proxy.port}/")
        try:
            with django_db_blocker.unblock(), live_server(DATABASE_URL=url) as srv:
                submit = f"{srv.url}/api/v1/permission-requests"
                assert heard_from_http(timed_post(submit, ci_bot.token, call("ls", "db-warm"))[0]).behavior == "allow"
                audited = Decision.objects.count()
                proxy.cut()
                outcomes = []
                for n in range(5):
                    for command in ("ls -la", "curl x", "rm -rf build"):
                        response, took = timed_post(
                            submit, ci_bot.token, call(command, f"db-{n}-{command[:2]}"), wait=2
                        )
                        outcomes.append((heard_from_http(response), took))
                    hook, took = timed_post(
                        f"{srv.url}/hooks/claude-code",
                        ci_bot.token,
                        {**HOOK_INPUT, "tool_use_id": f"db-hook-{n}"},
                        wait=2,
                    )
                    outcomes.append((heard_from_http(hook, "hook"), took))
                assert [o for o, _ in outcomes if o.behavior == "allow"] == []
                assert [t for _, t in outcomes if t > 15] == [], "a call hung while the database was down"
                assert [o for o, _ in outcomes if o.status >= 500 and o.status != 503] == [], outcomes
                proxy.mend()
                assert Decision.objects.count() == audited
                assert heard_from_http(timed_post(submit, ci_bot.token, call("ls", "db-back"))[0]).behavior == "allow"
        finally:
            proxy.close()
