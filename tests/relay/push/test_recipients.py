"""Who an ask is pushed to: exactly the people `permissions.can_decide` lets decide it, on every engine."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.contrib.auth.models import User

from approvals import permissions
from approvals.models import Membership, Role, Team

# Every kind of person: no membership, each role, a membership in another team only;
# active or not; superuser or not.
MEMBERSHIPS = [None, *Role, "elsewhere"]
PEOPLE = list(itertools.product(MEMBERSHIPS, [True, False], [True, False]))


@pytest.mark.django_db
@pytest.mark.parametrize("selector", ["subscriptions_for", "ntfy_topics_for"])
def test_an_ask_reaches_exactly_those_who_may_decide_it(selector: str, default_team: Any, other_team: Any) -> None:
    from relay.models import NtfyTopic, PushSubscription
    from relay.push import selectors

    people = []
    for n, (membership, active, superuser) in enumerate(PEOPLE):
        person = User.objects.create_user(f"person-{n}", is_active=active, is_superuser=superuser)
        if membership == "elsewhere":
            Membership.objects.create(user=person, team=other_team, role=Role.ADMIN)
        elif membership is not None:
            Membership.objects.create(user=person, team=default_team, role=membership)
        PushSubscription.objects.create(user=person, endpoint=f"https://push.example/{n}", p256dh="k", auth="a")
        PushSubscription.objects.create(user=person, endpoint=f"https://push.example/{n}/b", p256dh="k", auth="a")
        NtfyTopic.objects.create(user=person, topic=f"topic-{n}")
        people.append(person)
    deciders = {p.pk for p in people if permissions.at_least(permissions.role_in(p, default_team.pk), Role.APPROVER)}
    assert deciders and deciders != {p.pk for p in people}  # the table has both kinds

    reached = getattr(selectors, selector)(default_team.pk)
    assert {row.user_id for row in reached} == deciders
    assert [row.pk for row in reached] == sorted(row.pk for row in reached)
    per_person = 2 if selector == "subscriptions_for" else 1
    assert len(reached) == per_person * len(deciders)
    for row in reached:  # each with its person, read with it
        assert row.user.pk == row.user_id and row.user.username.startswith("person-")
    assert getattr(selectors, selector)(Team.objects.create(name="nobody-here").pk) == [
        row for row in reached if row.user.is_superuser
    ]
