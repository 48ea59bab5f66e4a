"""Bearer tokens: stored hashed, revocable, and marked when used."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from approvals import services
from approvals.models import PersonalToken


def health(token: str) -> int:
    return Client().get("/api/v1/health", HTTP_AUTHORIZATION=f"Bearer {token}").status_code


@pytest.mark.django_db
class PersonalTokenTests:
    def test_it_records_use_and_stops_working_when_revoked(self, alice: Any) -> None:
        token = services.personal_token_create(user=alice)
        stored = PersonalToken.objects.get(user=alice)
        assert token not in stored.token_hash and stored.last_used_at is None
        assert health(token) == 200
        stored.refresh_from_db()
        assert stored.last_used_at is not None
        services.personal_token_revoke(token=stored)
        assert health(token) == 401

    def test_it_stops_working_when_the_person_is_deactivated(self, alice: Any) -> None:
        token = services.personal_token_create(user=alice)
        alice.is_active = False
        alice.save()
        assert health(token) == 401


@pytest.mark.django_db
class AgentTokenTests:
    def test_it_records_when_an_agent_was_last_seen(self, ci_bot: Any) -> None:
        assert ci_bot.agent.last_seen_at is None
        assert health(ci_bot.token) == 200
        ci_bot.agent.refresh_from_db()
        assert ci_bot.agent.last_seen_at is not None
