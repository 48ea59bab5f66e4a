"""`/healthz` and `/readyz`: no login, answered before host checks and the HTTPS redirect.

The proxy probes each process on its loopback address over plain HTTP; readiness is
503 when the database or Redis does not answer.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.live import free_port, live_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class HealthProbeTests:
    def test_it_answers_both_probes_without_a_login(self, redis_url: str, django_db_blocker: Any) -> None:
        with django_db_blocker.unblock(), live_server(REDIS_URL=redis_url) as srv:
            health = httpx.get(f"{srv.url}/healthz", timeout=10)
            ready = httpx.get(f"{srv.url}/readyz", timeout=10)
            api = httpx.get(f"{srv.url}/api/v1/health", timeout=10)
        assert (health.status_code, health.json()) == (200, {"status": "ok"})
        assert ready.status_code == 200, ready.text
        assert ready.json() == {"status": "ready", "database": "ok", "redis": "ok", "process": "serving"}
        assert api.status_code in (401, 403)  # the API's own health still needs a login

    def test_it_answers_a_loopback_probe_in_production(self, redis_url: str, django_db_blocker: Any) -> None:
        production = live_server(
            REDIS_URL=redis_url,
            GATEHOUSE_ENV="production",
            DEBUG="0",
            SECRET_KEY="k" * 64,
            ALLOWED_HOSTS="gatehouse.example.com",
        )
        with django_db_blocker.unblock(), production as srv:
            page = httpx.get(f"{srv.url}/accounts/login/", timeout=10)
            health = httpx.get(f"{srv.url}/healthz", timeout=10)
            ready = httpx.get(f"{srv.url}/readyz", timeout=10)
        # The host is not allowed and the request is plain HTTP: Django would refuse it.
        assert page.status_code in (301, 400), page.status_code
        assert health.status_code == 200
        assert ready.status_code == 200, ready.text

    def test_it_is_not_ready_without_redis(self, django_db_blocker: Any) -> None:
        dead = f"redis://127.0.0.1:{free_port()}/0"
        with django_db_blocker.unblock(), live_server(REDIS_URL=dead) as srv:
            health = httpx.get(f"{srv.url}/healthz", timeout=10)
            ready = httpx.get(f"{srv.url}/readyz", timeout=10)
        assert health.status_code == 200  # alive, only not ready
        assert ready.status_code == 503
        assert ready.json()["status"] == "unavailable"
        assert ready.json()["redis"].startswith("unreachable")
        assert ready.json()["database"] == "ok"

    def test_it_is_not_ready_without_the_database(self, redis_url: str, django_db_blocker: Any) -> None:
        dead = f"postgres://postgres@127.0.0.1:{free_port()}/gatehouse"
        with django_db_blocker.unblock(), live_server(REDIS_URL=redis_url, DATABASE_URL=dead) as srv:
            ready = httpx.get(f"{srv.url}/readyz", timeout=15)
        assert ready.status_code == 503
        assert ready.json()["database"].startswith("unreachable")
        assert ready.json()["redis"] == "ok"
