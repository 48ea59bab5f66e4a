"""Team roles are ranked: viewer < approver < admin, and a superuser is above every team."""

from __future__ import annotations

from typing import Any

import pytest

from approvals import permissions, services
from approvals.models import Role
from tests.approvals.conftest import ASK_CALL


@pytest.mark.django_db
class RoleRankTests:
    def test_it_ranks_each_role_over_the_ones_below(self) -> None:
        table = {
            (role, needed): permissions.at_least(role, needed)
            for role in (None, Role.VIEWER, Role.APPROVER, Role.ADMIN)
            for needed in (Role.VIEWER, Role.APPROVER, Role.ADMIN)
        }
        assert {cell for cell, ok in table.items() if ok} == {
            (Role.VIEWER, Role.VIEWER),
            (Role.APPROVER, Role.VIEWER),
            (Role.APPROVER, Role.APPROVER),
            (Role.ADMIN, Role.VIEWER),
            (Role.ADMIN, Role.APPROVER),
            (Role.ADMIN, Role.ADMIN),
        }

    def test_it_lets_a_team_admin_decide_and_manage_only_their_team(
        self, carol: Any, alice: Any, bob: Any, mallory: Any, admin: Any, ci_bot: Any, default_team: Any
    ) -> None:
        request = services.request_submit(agent=ci_bot.agent, call=ASK_CALL).request
        assert permissions.can_decide(carol, request)
        assert permissions.is_team_admin(carol, default_team.pk)
        assert permissions.team_ids_for(carol, role=Role.APPROVER) == [default_team.pk]
        assert permissions.team_ids_for(carol, role=Role.ADMIN) == [default_team.pk]
        assert not permissions.is_team_admin(carol, mallory.memberships.get().team_id)
        # Approvers and viewers do not manage; the superuser manages every team unasked.
        assert [permissions.is_team_admin(p, default_team.pk) for p in (alice, bob, mallory, admin)] == [
            False,
            False,
            False,
            True,
        ]
        assert permissions.team_ids_for(alice, role=Role.ADMIN) == []
        assert permissions.is_admin_anywhere(carol) and not permissions.is_admin_anywhere(alice)

    def test_it_accepts_admin_as_a_membership_role(self, default_team: Any, alice: Any) -> None:
        services.membership_set(user=alice, team=default_team, role=Role.ADMIN)
        assert permissions.role_in(alice, default_team.pk) == Role.ADMIN
        with pytest.raises(services.ServiceError, match="viewer, approver or admin"):
            services.membership_set(user=alice, team=default_team, role="owner")
