"""Password guessing is throttled: after N failures in the window the login form answers 429."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import caches
from django.test import Client

LOGIN = "/accounts/login/"


@pytest.fixture(autouse=True)
def fresh_counters(settings: Any) -> Any:
    settings.GATEHOUSE_LOGIN_MAX_FAILURES = 3
    settings.GATEHOUSE_LOGIN_MAX_FAILURES_PER_ADDRESS = 5
    caches["ratelimit"].clear()
    yield
    caches["ratelimit"].clear()


def attempt(client: Client, username: str, password: str, address: str = "203.0.113.7") -> Any:
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


@pytest.mark.django_db
class LoginRateLimitTests:
    def test_it_refuses_even_the_right_password_after_too_many_failures(self, alice: Any) -> None:
        client = Client()
        statuses = [attempt(client, "alice", f"guess-{n}").status_code for n in range(3)]
        assert statuses == [200, 200, 200]  # the form again, with an error
        blocked = attempt(client, "alice", "alice-password-1")
        assert blocked.status_code == 429
        assert b"Too many failed logins" in blocked.content
        assert "_auth_user_id" not in client.session

    def test_it_still_lets_the_same_person_in_from_another_address(self, alice: Any) -> None:
        client = Client()
        for n in range(3):
            attempt(client, "alice", f"guess-{n}")
        response = attempt(Client(), "alice", "alice-password-1", address="198.51.100.9")
        assert response.status_code == 302

    def test_it_limits_spraying_one_password_over_many_usernames(self, alice: Any) -> None:
        client = Client()
        for n in range(5):
            assert attempt(client, f"user{n}", "Summer2026!").status_code == 200
        assert attempt(client, "alice", "alice-password-1").status_code == 429

    def test_it_forgets_a_persons_failures_after_they_log_in(self, alice: Any) -> None:
        client = Client()
        for n in range(2):
            attempt(client, "alice", f"guess-{n}")
        assert attempt(client, "alice", "alice-password-1").status_code == 302
        client.logout()
        for n in range(2):
            assert attempt(client, "alice", f"again-{n}").status_code == 200
        assert attempt(client, "alice", "alice-password-1").status_code == 302

    def test_it_throttles_the_admin_login_form_too(self, admin: Any) -> None:
        client = Client()
        for n in range(3):
            client.post("/admin/login/", {"username": "root", "password": f"x{n}"}, REMOTE_ADDR="203.0.113.8")
        response = client.post(
            "/admin/login/", {"username": "root", "password": "root-password-1"}, REMOTE_ADDR="203.0.113.8"
        )
        assert response.status_code == 429
