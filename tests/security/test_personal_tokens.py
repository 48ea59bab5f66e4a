"""Personal API tokens can be revoked by their owner and can expire."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from approvals import services
from approvals.models import PersonalToken

pytestmark = pytest.mark.django_db


def status_with(token: str) -> int:
    return Client().get("/api/v1/audit", HTTP_AUTHORIZATION=f"Bearer {token}").status_code


def page_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


class TokenExpiryTests:
    @pytest.mark.parametrize(
        ("shift", "works"),
        [
            (None, True),
            (timedelta(days=30), True),
            (timedelta(seconds=5), True),
            (timedelta(seconds=-1), False),
            (timedelta(days=-400), False),
        ],
    )
    def test_it_refuses_a_token_once_it_expired(self, alice: Any, shift: timedelta | None, works: bool) -> None:
        token = services.personal_token_create(user=alice, expires_in_days=7)
        expires_at = timezone.now() + shift if shift is not None else None
        PersonalToken.objects.filter(user=alice).update(expires_at=expires_at)
        assert status_with(token) == (200 if works else 401)

    @pytest.mark.parametrize(("given", "days"), [("30", 30), ("365", 365), ("0", 0), ("31", 0), ("-1", 0), ("x", 0)])
    def test_it_creates_a_token_with_the_chosen_lifetime_on_the_profile_page(
        self, alice: Any, given: str, days: int
    ) -> None:
        response = page_client(alice).post("/profile/", {"action": "token", "expires_in_days": given})
        assert response.status_code == 200
        token = PersonalToken.objects.get(user=alice)
        if days:
            assert token.expires_at is not None
            assert abs((token.expires_at - timezone.now()) - timedelta(days=days)) < timedelta(minutes=1)
        else:
            assert token.expires_at is None

    def test_it_refuses_an_unknown_lifetime_in_the_service(self, alice: Any) -> None:
        with pytest.raises(services.ServiceError):
            services.personal_token_create(user=alice, expires_in_days=3)


class TokenRevocationTests:
    def test_it_lets_the_owner_revoke_a_token_on_the_profile_page(self, alice: Any) -> None:
        token = services.personal_token_create(user=alice)
        kept = services.personal_token_create(user=alice)
        row = PersonalToken.objects.get(token_prefix=token[:8])
        assert status_with(token) == 200
        response = page_client(alice).post("/profile/", {"action": "revoke-token", "token_id": str(row.pk)})
        assert response.status_code == 302
        assert status_with(token) == 401
        assert status_with(kept) == 200

    @pytest.mark.parametrize("token_id", ["other", "999999", "", "-1", "1 OR 1=1"])
    def test_it_never_revokes_someone_elses_token(self, alice: Any, mallory: Any, token_id: str) -> None:
        token = services.personal_token_create(user=alice)
        row = PersonalToken.objects.get(token_prefix=token[:8])
        value = str(row.pk) if token_id == "other" else token_id
        response = page_client(mallory).post("/profile/", {"action": "revoke-token", "token_id": value})
        assert response.status_code == 302
        assert status_with(token) == 200

    def test_it_lists_the_persons_tokens_with_their_state(self, alice: Any) -> None:
        services.personal_token_create(user=alice, expires_in_days=30)
        revoked = services.personal_token_create(user=alice)
        PersonalToken.objects.filter(token_prefix=revoked[:8]).update(revoked_at=timezone.now())
        page = page_client(alice).get("/profile/").content.decode()
        assert "revoked" in page and "expires" in page
        assert page.count('value="revoke-token"') == 1


def api_with(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


class TokenApiTests:
    def test_a_person_lists_their_tokens_and_revokes_one_over_the_api(self, alice: Any, mallory: Any) -> None:
        used = services.personal_token_create(user=alice)
        other = services.personal_token_create(user=alice, expires_in_days=30)
        services.personal_token_create(user=mallory)
        listed = api_with(used).get("/api/v1/tokens").json()
        assert [(t["prefix"], t["current"]) for t in listed] == [(other[:8], False), (used[:8], True)]
        assert all("token_hash" not in t and "token" not in t for t in listed)
        other_id = next(t["id"] for t in listed if t["prefix"] == other[:8])
        assert api_with(used).delete(f"/api/v1/tokens/{other_id}").status_code == 204
        assert status_with(other) == 401 and status_with(used) == 200
        assert api_with(used).delete(f"/api/v1/tokens/{other_id}").status_code == 404  # already revoked

    def test_a_leaked_token_revokes_itself(self, alice: Any) -> None:
        token = services.personal_token_create(user=alice)
        own_id = api_with(token).get("/api/v1/tokens").json()[0]["id"]
        assert api_with(token).delete(f"/api/v1/tokens/{own_id}").status_code == 204
        assert status_with(token) == 401

    @pytest.mark.parametrize("token_id", ["other", "999999", "0", "-1", "1%20OR%201=1", "abc", "1.0"])
    def test_it_never_revokes_someone_elses_token_over_the_api(self, alice: Any, mallory: Any, token_id: str) -> None:
        token = services.personal_token_create(user=alice)
        row = PersonalToken.objects.get(token_prefix=token[:8])
        value = str(row.pk) if token_id == "other" else token_id
        response = api_with(services.personal_token_create(user=mallory)).delete(f"/api/v1/tokens/{value}")
        assert response.status_code == 404
        assert status_with(token) == 200

    def test_agents_and_strangers_have_no_tokens_here(self, ci_bot: Any) -> None:
        assert Client().get("/api/v1/tokens").status_code == 401
        assert api_with(ci_bot.token).get("/api/v1/tokens").status_code == 403
