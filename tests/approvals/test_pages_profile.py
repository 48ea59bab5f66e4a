"""The profile page: chat identities, personal tokens, and logging out."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from approvals.auth import authenticate_token
from approvals.models import ChatIdentity


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
class ProfilePageTests:
    def test_it_shows_a_one_time_link_code_and_lists_and_unlinks_accounts(self, alice: Any) -> None:
        client = client_for(alice)
        response = client.post("/profile/", {"action": "link-code"})
        assert response.status_code == 200 and 'id="link-code"' in response.content.decode()
        assert "/link " in response.content.decode()
        identity = ChatIdentity.objects.create(user=alice, provider="telegram", external_id="424242")
        page = client.get("/profile/").content.decode()
        assert "424242" in page and "not proven" in page
        assert client.post(f"/profile/identities/{identity.pk}/delete/").status_code == 302
        assert not ChatIdentity.objects.exists()

    def test_it_cannot_unlink_someone_elses_account(self, alice: Any, bob: Any) -> None:
        identity = ChatIdentity.objects.create(user=alice, provider="slack", external_id="U123")
        assert client_for(bob).post(f"/profile/identities/{identity.pk}/delete/").status_code == 404
        assert ChatIdentity.objects.exists()

    def test_it_creates_a_personal_token_shown_once(self, alice: Any) -> None:
        import re

        response = client_for(alice).post("/profile/", {"action": "token"})
        token = re.search(r'<code id="token-value">([^<]+)</code>', response.content.decode())
        assert token is not None and authenticate_token(token.group(1)) == alice


@pytest.mark.django_db
class LogoutTests:
    def test_it_logs_out_on_post_only(self, alice: Any) -> None:
        client = client_for(alice)
        assert client.get("/accounts/logout/").status_code == 405
        response = client.post("/accounts/logout/")
        assert response.status_code == 302 and response["Location"] == "/accounts/login/"
        assert client.get("/").status_code == 302

    def test_it_serves_the_login_page(self, client: Client) -> None:
        html = client.get("/accounts/login/").content.decode()
        assert 'name="username"' in html and 'name="csrfmiddlewaretoken"' in html
