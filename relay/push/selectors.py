"""Push reads: who is pushed an ask, and where its notifications went."""

from __future__ import annotations

import functools
import uuid

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Q

from approvals import permissions
from approvals.models import AuditKind, Decision, Membership, Role
from approvals.written import ModelColumns, column, table
from relay.models import NtfyTopic, PushActionToken, PushSubscription


def deciders_of(team_id: int) -> Q:
    """The active people who may decide the team's requests: its approvers and the superusers.

    - The same rule as `approvals.permissions.can_decide`, as one query for many people.
    """
    deciding = [role for role in Role if permissions.at_least(role, Role.APPROVER)]  # admins decide too
    approvers = Membership.objects.filter(team_id=team_id, role__in=deciding).values("user_id")
    return Q(user__is_active=True) & (Q(user__is_superuser=True) | Q(user_id__in=approvers))


def subscriptions_for(team_id: int) -> list[PushSubscription]:
    """The browsers an ask of this team is pushed to."""
    return list(PushSubscription.objects.filter(deciders_of(team_id)).select_related("user").order_by("id"))


def ntfy_topics_for(team_id: int) -> list[NtfyTopic]:
    """The ntfy topics an ask of this team is published to."""
    return list(NtfyTopic.objects.filter(deciders_of(team_id)).select_related("user").order_by("id"))


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
