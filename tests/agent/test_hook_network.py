"""`python -m agent.hook` through what stands between it and Gatehouse: TLS and proxies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.agent.relays import forward_proxy, https_front, self_signed_cert
from tests.e2e.claude_code.hookrun import hook_input, run_hook
from tests.live import live_server

pytestmark = pytest.mark.django_db(transaction=True)


def allow_ls(team: Any) -> None:
    from approvals import services

    services.rule_create(rule="Bash(ls:*)", behavior="allow", source="userSettings", team=team)


def decisions() -> list[Any]:
    from approvals.models import Decision

    return list(Decision.objects.order_by("id"))


class HookHttpsTests:
    def test_it_asks_an_https_server_it_trusts(self, ci_bot: Any, default_team: Any, tmp_path: Path) -> None:
        allow_ls(default_team)
        cert, key = self_signed_cert(tmp_path)
        with live_server() as srv, https_front(srv.port, cert, key) as port:
            code, out, err = run_hook(
                f"https://127.0.0.1:{port}", ci_bot.token, hook_input("PreToolUse", "ls -la"), SSL_CERT_FILE=str(cert)
            )
        assert code == 0, err
        assert out["hookSpecificOutput"]["permissionDecision"] == "allow"
        [row] = decisions()
        assert row.behavior == "allow"

    def test_it_refuses_an_https_server_it_cannot_verify(self, ci_bot: Any, default_team: Any, tmp_path: Path) -> None:
        allow_ls(default_team)
        cert, key = self_signed_cert(tmp_path)
        with live_server() as srv, https_front(srv.port, cert, key) as port:
            code, out, err = run_hook(
                f"https://127.0.0.1:{port}",
                ci_bot.token,
                hook_input("PreToolUse", "ls -la"),
                "--on-unreachable",
                "deny",
            )
        assert code == 0
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert "CERTIFICATE_VERIFY_FAILED" in err and err.count("\n") == 1
        assert decisions() == []


class HookProxyTests:
    def test_it_goes_through_the_proxy_named_in_http_proxy(self, ci_bot: Any, default_team: Any) -> None:
        allow_ls(default_team)
        seen: list[str] = []
        with live_server() as srv, forward_proxy(seen) as port:
            proxy = f"http://127.0.0.1:{port}"
            code, out, err = run_hook(
                srv.url, ci_bot.token, hook_input("PreToolUse", "ls -la"), http_proxy=proxy, no_proxy="", NO_PROXY=""
            )
        assert code == 0, err
        assert out["hookSpecificOutput"]["permissionDecision"] == "allow"
        assert seen and seen[0].startswith(f"POST {srv.url}/hooks/claude-code?wait=0.0 ")
