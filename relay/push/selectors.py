"""Push reads: who is pushed an ask, and where its notifications went."""

from __future__ import annotations

import functools
import uuid
from typing import Any

from django.contrib.auth.models import User
from django.db import connection

from approvals import permissions
from approvals.models import AuditKind, Decision, Membership, Role
from approvals.written import JoinedRead, ModelColumns, column, table
from relay.models import NtfyTopic, PushActionToken, PushSubscription


def subscriptions_for(team_id: int) -> list[PushSubscription]:
    """The browsers an ask of this team is pushed to, each with its person (`user`)."""
    condition, params, order = _deciders(PushSubscription, team_id)
    return _SUBSCRIPTIONS.where(condition, params, order=order)


def ntfy_topics_for(team_id: int) -> list[NtfyTopic]:
    """The ntfy topics an ask of this team is published to, each with its person (`user`)."""
    condition, params, order = _deciders(NtfyTopic, team_id)
    return _TOPICS.where(condition, params, order=order)


# Read for every ask, nearly always to find none: written out once per process
# (`approvals.written`), as compiling the querysets cost more than their round trips.
_SUBSCRIPTIONS = JoinedRead(PushSubscription, relations=("user",), match=())
_TOPICS = JoinedRead(NtfyTopic, relations=("user",), match=())


def _deciders(model: type[PushSubscription] | type[NtfyTopic], team_id: int) -> tuple[str, list[Any], str]:
    """Rows of `model` (`t0`, its person `t1`) whose person may decide the team's requests:
    active, and a superuser or one of its approvers (admins decide too).

    - The same rule as `approvals.permissions.can_decide`, as one statement for many people.
    """
    deciding = [str(role) for role in Role if permissions.at_least(role, Role.APPROVER)]
    condition, order = _deciders_sql(connection.vendor, model, len(deciding))
    return condition, [True, True, team_id, *deciding], order


@functools.cache
def _deciders_sql(vendor: str, model: type[PushSubscription] | type[NtfyTopic], roles: int) -> tuple[str, str]:
    member, person = Membership, f"t0.{column(model, 'user')}"
    # Every name comes from the models, quoted; the values are parameters.
    condition = (
        f"t1.{column(User, 'is_active')} = %s AND (t1.{column(User, 'is_superuser')} = %s"  # noqa: S608
        f" OR {person} IN (SELECT m.{column(member, 'user')} FROM {table(member)} m"
        f" WHERE m.{column(member, 'team')} = %s AND m.{column(member, 'role')} IN ({', '.join(['%s'] * roles)})))"
    )
    return condition, f"t0.{column(model, 'id')}"


def voters_of(request_id: uuid.UUID) -> set[int]:
    """The people who approved a quorum call so far: a ladder step does not push it to them again."""
    votes = Decision.objects.filter(request_id=request_id, kind=AuditKind.VOTE, decided_by_user__isnull=False)
    return set(votes.values_list("decided_by_user_id", flat=True))


def subscriptions_notified(request_id: uuid.UUID) -> list[PushSubscription]:
    """The subscriptions an ask was pushed to (they hold its tokens), to tell them it is over.

    - Read after every decision, nearly always to find none, so written out once per
      process (`approvals.written`): compiling the queryset cost more than its round trip.
    """
    field = PushActionToken._meta.get_field("request")
    with connection.cursor() as cursor:
        cursor.execute(_notified_sql(connection.vendor), [field.get_db_prep_value(request_id, connection)])
        return [subscription for subscription, _ in _SUBSCRIPTION.rows(cursor.fetchall()) if subscription is not None]


_SUBSCRIPTION = ModelColumns(PushSubscription, "s")


@functools.cache
def _notified_sql(vendor: str) -> str:
    subscription, token = PushSubscription, PushActionToken
    # Every name comes from the models, quoted; the values are parameters.
    return (
        f"SELECT {_SUBSCRIPTION.columns} FROM {table(subscription)} s"  # noqa: S608
        f" WHERE s.{column(subscription, 'id')} IN (SELECT t.{column(token, 'subscription')}"
        f" FROM {table(token)} t WHERE t.{column(token, 'request')} = %s"
        f" AND t.{column(token, 'subscription')} IS NOT NULL) ORDER BY s.{column(subscription, 'id')}"
    )


def subscriptions_of(user: User) -> list[PushSubscription]:
    return list(PushSubscription.objects.filter(user=user).order_by("-created_at"))


def ntfy_topic_of(user: User) -> NtfyTopic | None:
    return NtfyTopic.objects.filter(user=user).first()


def action_token(token_hash: str) -> PushActionToken | None:
    return PushActionToken.objects.select_related("user", "request").filter(token_hash=token_hash).first()
