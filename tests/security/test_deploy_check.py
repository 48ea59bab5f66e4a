"""Production settings pass Django's deployment checklist with no warning at all."""

from __future__ import annotations

import os
import secrets
import string
import subprocess
import sys

import pytest

from tests.live import ROOT


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS"}}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def random_key() -> str:
    alphabet = string.ascii_letters + string.digits + "!@#%^&*(-_=+)"
    return "".join(secrets.choice(alphabet) for _ in range(60))


class DeployCheckTests:
    def test_it_passes_check_deploy_at_warning_level_in_production(self) -> None:
        result = manage(
            "check",
            "--deploy",
            "--fail-level",
            "WARNING",
            GATEHOUSE_ENV="production",
            SECRET_KEY=random_key(),
            ALLOWED_HOSTS="x",
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "no issues" in result.stdout

    def test_it_refuses_to_start_in_production_with_the_development_key(self) -> None:
        result = manage("check", GATEHOUSE_ENV="production", ALLOWED_HOSTS="x")
        assert result.returncode != 0
        assert "SECRET_KEY" in result.stderr

    def test_it_refuses_to_start_in_production_with_debug_on(self) -> None:
        result = manage("check", GATEHOUSE_ENV="production", SECRET_KEY=random_key(), ALLOWED_HOSTS="x", DEBUG="1")
        assert result.returncode != 0
        assert "DEBUG" in result.stderr


ENVIRONMENT_TYPOS = [
    "prod",
    "Production",
    "PRODUCTION",
    "production ",
    " production",
    "prodution",
    "dev",
    "staging",
    "1",
]


class EnvironmentNameTests:
    @pytest.mark.parametrize("name", ENVIRONMENT_TYPOS)
    def test_it_refuses_to_start_with_an_unknown_environment_name(self, name: str) -> None:
        result = manage("check", GATEHOUSE_ENV=name, SECRET_KEY=random_key(), ALLOWED_HOSTS="x")
        assert result.returncode != 0
        assert "GATEHOUSE_ENV must be one of development, production" in result.stderr

    def test_it_starts_with_each_known_environment_name(self) -> None:
        for name in ("development", "production"):
            result = manage("check", GATEHOUSE_ENV=name, SECRET_KEY=random_key(), ALLOWED_HOSTS="x")
            assert result.returncode == 0, result.stderr


class OriginSettingTests:
    @pytest.mark.parametrize("entry", ["gatehouse.example.com", "https://gatehouse.example.com/", "*", "https://*.x"])
    def test_it_refuses_to_start_with_an_allowed_origin_that_is_not_an_origin(self, entry: str) -> None:
        result = manage("check", GATEHOUSE_ALLOWED_ORIGINS=entry)
        assert result.returncode != 0
        assert "GATEHOUSE_ALLOWED_ORIGINS" in result.stderr
