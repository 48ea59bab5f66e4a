"""Management commands: tokens on the last line, usable at once; admin set-up is idempotent."""

from __future__ import annotations

import io
import subprocess
import sys
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from approvals.models import Agent, Membership
from tests.live import ROOT, server_env


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run manage.py as a person would, stdout and stderr interleaved as on a terminal."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=server_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )


def health(token: str) -> int:
    return Client().get("/api/v1/health", HTTP_AUTHORIZATION=f"Bearer {token}").status_code


@pytest.mark.django_db(transaction=True)
class TokenCommandTests:
    def test_it_prints_an_agent_token_that_works_on_the_last_line(self, default_team: Any) -> None:
        result = manage("createagent", "demo", "--mode", "acceptEdits")
        assert result.returncode == 0, result.stdout
        token = result.stdout.strip().splitlines()[-1]
        assert token.startswith("gha_")
        assert health(token) == 200
        agent = Agent.objects.get(name="demo")
        assert agent.default_mode == "acceptEdits"
        assert token not in agent.token_hash

    def test_it_prints_a_personal_token_that_works_on_the_last_line(self, alice: Any) -> None:
        result = manage("createtoken", "alice")
        assert result.returncode == 0, result.stdout
        token = result.stdout.strip().splitlines()[-1]
        assert token.startswith("ghp_")
        assert health(token) == 200


@pytest.mark.django_db
class CommandErrorTests:
    def test_it_refuses_a_duplicate_agent_name(self, ci_bot: Any) -> None:
        with pytest.raises(CommandError, match="already exists"):
            call_command("createagent", "ci-bot", stdout=io.StringIO(), stderr=io.StringIO())

    def test_it_refuses_an_unknown_mode(self, default_team: Any) -> None:
        with pytest.raises(CommandError, match="invalid choice"):
            call_command("createagent", "x", "--mode", "yolo", stdout=io.StringIO(), stderr=io.StringIO())

    def test_it_refuses_a_token_for_nobody(self, db: None) -> None:
        with pytest.raises(CommandError, match="no user named 'ghost'"):
            call_command("createtoken", "ghost", stdout=io.StringIO())

    def test_it_creates_the_admin_once(self, db: None, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("GATEHOUSE_ADMIN_PASSWORD", "a-long-admin-password-1")
        out = io.StringIO()
        call_command("ensure_admin", stdout=out)
        assert "Created admin user 'admin'" in out.getvalue()
        assert "a-long-admin-password-1" not in out.getvalue()
        again = io.StringIO()
        call_command("ensure_admin", stdout=again)
        assert again.getvalue() == ""
        admin = get_user_model().objects.get(username="admin")
        assert admin.is_superuser and admin.check_password("a-long-admin-password-1")
        assert Membership.objects.get(user=admin).role == "admin"

    def test_it_prints_a_generated_password_when_none_is_given(self, db: None, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("GATEHOUSE_ADMIN_PASSWORD", raising=False)
        out = io.StringIO()
        call_command("ensure_admin", stdout=out)
        password = out.getvalue().strip().rsplit(" ", 1)[-1]
        assert get_user_model().objects.get(username="admin").check_password(password)

    def test_it_says_which_backends_it_uses(self, db: None) -> None:
        out = io.StringIO()
        call_command("gatehouse_banner", stdout=out)
        assert "Gatehouse: database" in out.getvalue()
