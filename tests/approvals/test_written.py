"""The written-out reads return what the ORM's `select_related` reads return.

The reads on the path of every call (`approvals.written`): the agent or person a bearer
token names, a person's role in a team, the team's autopilot, the browsers to tell that
an ask is over, and the card each process with a dashboard open reads for each announced
request; and the fence every decision passes. Each is a statement written out once per
process from the models' fields instead of a query compiled per call; these tests hold
each to the ORM's answer, field by field and type by type, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import contextlib
import enum
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Model, Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import selectors as approvals_selectors
from approvals import services
from approvals.models import (
    Agent,
    AutopilotSetting,
    Membership,
    PermissionRequest,
    PersonalToken,
    RequestState,
    Team,
)
from approvals.services.decide import fence
from relay import selectors
from relay.models import PushActionToken, PushSubscription
from relay.push import selectors as push_selectors
from tests.relay.wsclient import ask_call
from tests.round_trips import protocol_if_postgresql, round_trips

pytestmark = pytest.mark.django_db


def orm_read(request_id: uuid.UUID) -> PermissionRequest:
    return PermissionRequest.objects.select_related("agent", "team", "decision").get(pk=request_id)


def fields_of(instance: Model | None) -> list[tuple[str, Any, type]]:
    if instance is None:
        return []
    return [
        (f.attname, getattr(instance, f.attname), type(getattr(instance, f.attname)))
        for f in instance._meta.concrete_fields
    ]


def assert_same_read(request_id: uuid.UUID) -> PermissionRequest:
    written, orm = selectors.requests_for_cards([request_id])[0].get(request_id), orm_read(request_id)
    assert written is not None
    assert fields_of(written) == fields_of(orm)
    for relation in ("agent", "team", "decision"):
        assert fields_of(getattr(written, relation)) == fields_of(getattr(orm, relation)), relation
    return written


def pending(agent: Any, **extra: Any) -> PermissionRequest:
    return services.request_submit(agent=agent, call=ask_call(**extra)).request


class CardReadTests:
    def test_a_pending_request_reads_as_the_orm_reads_it_without_a_decision(self, ci_bot: Any) -> None:
        request = pending(ci_bot.agent, tool_use_id="toolu_card_1")
        written = assert_same_read(request.pk)
        assert written.decision is None

    def test_a_request_decided_by_a_person_reads_with_its_decision(self, ci_bot: Any, alice: Any) -> None:
        request = pending(ci_bot.agent, tool_use_id="toolu_card_2")
        services.request_decide(request.pk, services.Answer(behavior="allow", surface="web", user=alice))
        written = assert_same_read(request.pk)
        assert written.state == RequestState.DECIDED
        assert written.decision is not None and written.decision.behavior == "allow"

    def test_a_call_decided_at_submit_and_an_expired_ask_read_alike(self, ci_bot: Any) -> None:
        team = ci_bot.agent.team
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=team)
        call = {"tool_name": "Bash", "tool_input": {"command": "git status"}, "session_id": "s2", "cwd": "/tmp/proj"}
        decided = services.request_submit(agent=ci_bot.agent, call=call).request
        assert assert_same_read(decided.pk).decision is not None
        asked = pending(ci_bot.agent, command="rm -rf dist")
        services.request_expire(request=asked)
        assert assert_same_read(asked.pk).state == RequestState.EXPIRED

    def test_an_unknown_id_reads_nothing(self, ci_bot: Any) -> None:
        pending(ci_bot.agent)
        assert selectors.requests_for_cards([uuid.UUID("5b0c1e0e-3f4a-4d8e-9c1a-7e2b9d4f6a10")]) == ({}, {})
        assert selectors.requests_for_cards([]) == ({}, {})

    def test_many_requests_and_their_teams_read_in_one_round_trip_each_as_the_orm_reads_it(
        self, ci_bot: Any, other_bot: Any, alice: Any, bob: Any, carol: Any, mallory: Any
    ) -> None:
        asked = [pending(ci_bot.agent, tool_use_id=f"toolu_many_{n}", command=f"rm -rf d{n}") for n in range(5)]
        elsewhere = pending(other_bot.agent, tool_use_id="toolu_many_other")
        services.request_decide(asked[0].pk, services.Answer(behavior="deny", surface="web", user=alice))
        unknown = uuid.uuid4()
        with round_trips() as trips:
            read, teams = selectors.requests_for_cards([*(r.pk for r in asked), elsewhere.pk, unknown])
        # Two statements, sent in one round trip on PostgreSQL.
        assert [len(trip) for trip in trips] == ([2] if connection.vendor == "postgresql" else [1, 1]), trips
        assert set(read) == {r.pk for r in asked} | {elsewhere.pk}
        for request in [*asked, elsewhere]:
            written, orm = read[request.pk], orm_read(request.pk)
            assert fields_of(written) == fields_of(orm)
            for relation in ("agent", "team", "decision"):
                assert fields_of(getattr(written, relation)) == fields_of(getattr(orm, relation)), relation
        assert read[asked[0].pk].decision is not None and read[asked[1].pk].decision is None
        # Every member of each request's team with their role, and no other team.
        expected = {
            team: dict(Membership.objects.filter(team_id=team).values_list("user_id", "role"))
            for team in {ci_bot.agent.team_id, other_bot.agent.team_id}
        }
        assert teams == expected
        assert set(teams[ci_bot.agent.team_id].values()) == {"approver", "viewer", "admin"}
        assert mallory.pk in teams[other_bot.agent.team_id] and mallory.pk not in teams[ci_bot.agent.team_id]

    def test_a_team_without_members_reads_as_no_one(self, ci_bot: Any) -> None:
        lonely = Team.objects.create(name="nobody-here")
        agent, _ = services.agent_create(name="lonely-bot", team=lonely)
        request = pending(agent, tool_use_id="toolu_lonely")
        read, teams = selectors.requests_for_cards([request.pk])
        assert set(read) == {request.pk} and teams == {lonely.pk: {}}


class WhereTests:
    """`JoinedRead.where`: rows by a condition written from the models, each with its relations."""

    def test_rows_read_as_the_orm_reads_them_in_order_and_first_is_refused(self, alice: Any, bob: Any) -> None:
        from django.contrib.auth.models import User

        from approvals.written import JoinedRead, column
        from relay.models import PushSubscription

        for person, n in ((bob, 1), (alice, 2), (alice, 3)):
            PushSubscription.objects.create(user=person, endpoint=f"https://push.example/{n}", p256dh="k", auth="a")
        read = JoinedRead(PushSubscription, relations=("user",), match=())
        found = read.where(
            f"t1.{column(User, 'username')} = %s", ["alice"], order=f"t0.{column(PushSubscription, 'id')}"
        )
        orm = list(PushSubscription.objects.filter(user=alice).select_related("user").order_by("id"))
        assert [fields_of(row) for row in found] == [fields_of(row) for row in orm] and len(found) == 2
        assert [fields_of(row.user) for row in found] == [fields_of(row.user) for row in orm]
        with pytest.raises(TypeError, match="use where"):
            read.first()


class RequestGetTests:
    def test_a_request_reads_with_its_agent_and_team_as_the_orm_reads_it(self, ci_bot: Any, alice: Any) -> None:
        asked = pending(ci_bot.agent, tool_use_id="toolu_get_1")
        decided = pending(ci_bot.agent, tool_use_id="toolu_get_2", command="rm -rf other")
        services.request_decide(decided.pk, services.Answer(behavior="deny", surface="web", user=alice))
        for request_id in (asked.pk, str(decided.pk)):
            written = approvals_selectors.request_get(request_id)
            orm = PermissionRequest.objects.select_related("agent", "team").get(pk=request_id)
            assert written is not None
            assert fields_of(written) == fields_of(orm)
            assert fields_of(written.agent) == fields_of(orm.agent)
            assert fields_of(written.team) == fields_of(orm.team)

    @pytest.mark.parametrize("request_id", [uuid.UUID(int=7), "5b0c1e0e-3f4a-4d8e-9c1a-7e2b9d4f6a10", "nope", None, 7])
    def test_an_unknown_or_malformed_id_reads_nothing(self, ci_bot: Any, request_id: Any) -> None:
        pending(ci_bot.agent)
        assert approvals_selectors.request_get(request_id) is None


class AgentByTokenTests:
    def test_a_live_agent_reads_with_its_team_as_the_orm_reads_it(self, ci_bot: Any) -> None:
        digest = services.token_hash(ci_bot.token)
        written, _ = approvals_selectors.agent_by_token_hash(digest)
        orm = Agent.objects.select_related("team").get(token_hash=digest)
        assert written is not None
        assert fields_of(written) == fields_of(orm)
        assert fields_of(written.team) == fields_of(orm.team)

    def test_a_revoked_agent_or_an_unknown_digest_reads_nothing(self, ci_bot: Any, other_bot: Any) -> None:
        services.agent_revoke(agent=other_bot.agent)
        assert approvals_selectors.agent_by_token_hash(services.token_hash(other_bot.token))[0] is None
        assert approvals_selectors.agent_by_token_hash(services.token_hash("gh_not_a_token"))[0] is None
        assert approvals_selectors.agent_by_token_hash("")[0] is None
        assert approvals_selectors.agent_by_token_hash(services.token_hash(ci_bot.token))[0] is not None


class PersonalTokenTests:
    @pytest.mark.parametrize("kind", ["until revoked", "expiring later", "expired", "revoked", "unknown"])
    def test_a_personal_token_reads_with_its_person_as_the_orm_reads_it(self, alice: Any, kind: str) -> None:
        token = services.personal_token_create(user=alice, expires_in_days=0 if kind == "until revoked" else 7)
        digest = services.token_hash(token if kind != "unknown" else "ghp_not_a_token")
        stored = PersonalToken.objects.get(user=alice)
        if kind == "expired":
            PersonalToken.objects.filter(pk=stored.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
        if kind == "revoked":
            services.personal_token_revoke(token=stored)
        live = Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
        orm = PersonalToken.objects.select_related("user").filter(live, token_hash=digest, revoked_at__isnull=True)
        with CaptureQueriesContext(connection) as queries:
            written, rows = approvals_selectors.personal_token_by_hash(digest)
            person = fields_of(written.user) if written is not None else []
        assert rows == []  # nothing sent with it
        assert len(queries) == 1, queries
        assert (written is None) == (kind in ("expired", "revoked", "unknown"))
        assert fields_of(written) == fields_of(orm.first())
        assert person == (fields_of(orm.first().user) if written is not None else [])  # type: ignore[union-attr]


class MembershipRoleTests:
    def test_a_persons_role_reads_as_the_orm_reads_it_in_every_team(
        self, alice: Any, bob: Any, carol: Any, mallory: Any, admin: Any, other_team: Any
    ) -> None:
        teams = [*Team.objects.values_list("pk", flat=True), 10_000]
        seen = set()
        for person in (alice, bob, carol, mallory, admin):
            for team_id in teams:
                orm = Membership.objects.filter(user=person, team_id=team_id).values_list("role", flat=True).first()
                written = approvals_selectors.membership_role(person.pk, team_id)
                assert written == orm, (person.username, team_id)
                seen.add(written)
        assert seen == {"viewer", "approver", "admin", None}


class AutopilotSettingTests:
    def test_a_teams_setting_reads_as_the_orm_reads_it_and_a_team_without_one_is_off(
        self, ci_bot: Any, other_team: Any
    ) -> None:
        team = ci_bot.agent.team
        services.autopilot_configure(team=team, enabled=True, approvals=3, trial_hours=48)
        written = approvals_selectors.autopilot_setting(team.pk)
        assert fields_of(written) == fields_of(AutopilotSetting.objects.get(team=team))
        assert written.enabled and written.approvals == 3
        default = approvals_selectors.autopilot_setting(other_team.pk)
        assert fields_of(default) == fields_of(AutopilotSetting(team=other_team))
        assert not default.enabled and default._state.adding


class PushNotifiedTests:
    def test_the_browsers_an_ask_was_pushed_to_read_as_the_orm_reads_them(
        self, ci_bot: Any, alice: Any, carol: Any
    ) -> None:
        asked, other = pending(ci_bot.agent), pending(ci_bot.agent, command="make other")
        browsers = [
            PushSubscription.objects.create(user=person, endpoint=f"https://push.example/{n}", p256dh="k", auth="a")
            for n, person in enumerate((alice, carol, alice))
        ]
        for n, (request, browser) in enumerate([(asked, browsers[2]), (asked, browsers[0]), (other, browsers[1])]):
            for action in ("allow", "deny"):
                PushActionToken.objects.create(
                    token_hash=f"{n}{action}".ljust(64, "0"),
                    request=request,
                    user=browser.user,
                    action=action,
                    channel="webpush",
                    subscription=browser,
                    expires_at=timezone.now() + timedelta(hours=1),
                )
        PushActionToken.objects.create(
            token_hash="ntfy".ljust(64, "0"),
            request=asked,
            user=carol,
            action="allow",
            channel="ntfy",
            expires_at=timezone.now() + timedelta(hours=1),
        )
        for request in (asked, other, pending(ci_bot.agent, command="make none")):
            ids = PushActionToken.objects.filter(request=request, subscription__isnull=False).values("subscription_id")
            orm = list(PushSubscription.objects.filter(pk__in=ids).order_by("id"))
            written = push_selectors.subscriptions_notified(request.pk)
            assert [fields_of(s) for s in written] == [fields_of(s) for s in orm]
        assert [s.pk for s in push_selectors.subscriptions_notified(asked.pk)] == [browsers[0].pk, browsers[2].pk]


class FenceTests:
    def stored(self, request: PermissionRequest) -> tuple[str, int, Any]:
        row = PermissionRequest.objects.get(pk=request.pk)
        return row.state, row.version, row.decided_at

    def test_the_fence_moves_a_pending_request_once_and_stores_what_it_returns(self, ci_bot: Any) -> None:
        request = pending(ci_bot.agent)
        fenced = fence(request, RequestState.DECIDED, before_deadline=True)
        assert fenced is not None and request.state == RequestState.PENDING
        assert self.stored(request) == (RequestState.DECIDED, request.version + 1, fenced.decided_at)
        assert fenced.version == request.version + 1
        assert fence(request, RequestState.CANCELLED) is None  # the row is no longer pending
        assert self.stored(request) == (RequestState.DECIDED, request.version + 1, fenced.decided_at)

    @pytest.mark.parametrize("before_deadline", [True, False])
    def test_past_its_deadline_only_a_fence_that_ignores_the_deadline_moves_it(
        self, ci_bot: Any, before_deadline: bool
    ) -> None:
        request = pending(ci_bot.agent)
        for deadline in (timezone.now() - timedelta(seconds=1), timezone.now() + timedelta(hours=1)):
            PermissionRequest.objects.filter(pk=request.pk).update(deadline_at=deadline)
            expected = PermissionRequest.objects.filter(pk=request.pk, state=RequestState.PENDING)
            if before_deadline:
                expected = expected.filter(Q(deadline_at__isnull=True) | Q(deadline_at__gt=timezone.now()))
            movable = expected.exists()
            fenced = fence(request, RequestState.EXPIRED, before_deadline=before_deadline)
            assert (fenced is not None) == movable, deadline
            if fenced is not None:
                assert self.stored(request) == (RequestState.EXPIRED, request.version + 1, fenced.decided_at)
                return
            assert self.stored(request) == (RequestState.PENDING, request.version, None)
        pytest.fail("no deadline let the fence through")


def stored_as_held(instance: Model) -> None:
    """The row the insert wrote, read back by the ORM, is the instance as held in memory
    (a choice held as its enum member reads back as its text, as after any save)."""
    stored = type(instance)._default_manager.get(pk=instance.pk)
    held = [(name, value, str if isinstance(value, enum.Enum) else kind) for name, value, kind in fields_of(instance)]
    assert fields_of(stored) == held


class WrittenInsertTests:
    def test_an_ask_is_stored_as_the_orm_stores_the_same_request(self, ci_bot: Any) -> None:
        request = pending(ci_bot.agent, tool_use_id="toolu_insert_1", additional_directories=["/srv/a"])
        stored_as_held(request)
        twin = PermissionRequest(
            **{f.attname: getattr(request, f.attname) for f in PermissionRequest._meta.concrete_fields}
        )
        twin.id, twin.tool_use_id = uuid.uuid4(), "toolu_insert_2"
        twin.save(force_insert=True)
        skip = {"id", "tool_use_id", "created_at"}
        assert [f for f in fields_of(orm_read(twin.pk)) if f[0] not in skip] == [
            f for f in fields_of(orm_read(request.pk)) if f[0] not in skip
        ]

    def test_a_call_decided_at_submit_stores_its_request_audit_row_and_search_text(self, ci_bot: Any) -> None:
        from approvals.audit import verify_chain
        from approvals.models import AuditSearch

        team = ci_bot.agent.team
        services.rule_create(rule="Bash(git status)", behavior="allow", source="projectSettings", team=team)
        call = {"tool_name": "Bash", "tool_input": {"command": "git status"}, "session_id": "s3", "cwd": "/tmp/proj"}
        result = services.request_submit(agent=ci_bot.agent, call=call)
        assert result.decision is not None and result.decision.pk is not None
        stored_as_held(result.request)
        stored_as_held(result.decision)
        assert orm_read(result.request.pk).decision_id == result.decision.pk
        assert "git status" in AuditSearch.objects.get(decision_id=result.decision.pk).text
        assert list(verify_chain()) == []

    def test_an_instance_already_saved_is_refused(self, ci_bot: Any) -> None:
        from approvals.written import WrittenInsert

        request = pending(ci_bot.agent)
        with pytest.raises(ValueError, match="already saved"):
            WrittenInsert(PermissionRequest).insert(request)


class ModelColumnsTests:
    """Hand-written statements that read a model's columns read them as the ORM does."""

    def test_the_submit_context_reads_the_team_settings_as_the_orm_reads_them(self, ci_bot: Any) -> None:
        from approvals.models import TeamSettings

        agent = ci_bot.agent
        context = approvals_selectors.submit_context(agent=agent, tool_use_id="t1", session_id="s1", pending_limit=5)
        # No settings saved: the defaults, unsaved, for the agent's team.
        assert context.team_settings.pk == agent.team_id and context.team_settings._state.adding
        assert not TeamSettings.objects.filter(team_id=agent.team_id).exists()
        services.team_settings_update(
            team=agent.team, ask_timeout=90, remind_after=30, unknown_tools="deny", exclude_owner=True
        )
        pending(agent, tool_use_id="toolu_ctx_1")
        context = approvals_selectors.submit_context(
            agent=agent, tool_use_id="toolu_ctx_1", session_id="s1", pending_limit=5
        )
        assert fields_of(context.team_settings) == fields_of(TeamSettings.objects.get(team_id=agent.team_id))
        assert (context.replayed, context.pending, context.paused) == (True, 1, False)

    def test_a_teams_webhooks_for_a_call_read_as_the_orm_reads_them(self, ci_bot: Any, other_bot: Any) -> None:
        from relay.models import Webhook
        from relay.webhooks import _enabled

        team = ci_bot.agent.team
        made = [
            Webhook.objects.create(team=team, name=f"h{n}", url="http://127.0.0.1:9/h", event=event, secret="s")
            for n, event in enumerate(["PreToolUse", "PermissionRequest", "PreToolUse"])
        ]
        Webhook.objects.filter(pk=made[2].pk).update(enabled=False)
        Webhook.objects.create(
            team=other_bot.agent.team, name="theirs", url="http://127.0.0.1:9/t", event="PreToolUse", secret="s"
        )
        both = _enabled(team.pk, Webhook.Event.PRE_TOOL_USE, Webhook.Event.PERMISSION_REQUEST)
        orm = Webhook.objects.filter(pk__in=[made[0].pk, made[1].pk]).order_by("id")
        assert [fields_of(hook) for hook in both] == [fields_of(hook) for hook in orm]
        assert [hook.pk for hook in _enabled(team.pk, Webhook.Event.PRE_TOOL_USE)] == [made[0].pk]
        assert _enabled(team.pk + 1000, Webhook.Event.PRE_TOOL_USE) == []


@pytest.fixture
def other_connection() -> Any:
    """A second connection to the test database: what another process would see."""
    from django.db import DEFAULT_DB_ALIAS, connections

    other = connections.create_connection(DEFAULT_DB_ALIAS)
    yield other
    other.close()


def _rows_named(other: Any, marker: str) -> int:
    with other.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM approvals_permissionrequest WHERE session_id = %s", [marker])
        return int(cursor.fetchone()[0])


def _message(agent: Any, marker: str, *then: Any) -> list[Any]:
    """An ask's insert under an advisory lock, then `then`: one `run_together` message."""
    from approvals.written import WrittenInsert

    request = PermissionRequest(
        agent=agent, team=agent.team, tool_use_id=f"toolu_{uuid.uuid4().hex}", tool_name="Bash", session_id=marker
    )
    request.tool_input = {"command": "ls"}
    lock = [("SELECT pg_advisory_xact_lock(%s)", [4242])] if connection.vendor == "postgresql" else []
    return [*lock, WrittenInsert(PermissionRequest).statement(request), *then]


# Transactional: the test's own transaction would be the transaction these open or join.
@pytest.mark.django_db(transaction=True)
class MessageTransactionTests:
    """`message_transaction`: on PostgreSQL the one message is the whole transaction."""

    def test_the_message_commits_as_it_ends_with_its_begin_and_commit_in_its_one_round_trip(
        self, ci_bot: Any, other_connection: Any
    ) -> None:
        from approvals.written import message_transaction, run_together

        ran: list[str] = []
        with CaptureQueriesContext(connection) as captured, protocol_if_postgresql() as trips, message_transaction():
            run_together(_message(ci_bot.agent, "m-commit"))
            # Before the block ends, another connection sees the row, and the lock is free.
            seen = _rows_named(other_connection, "m-commit")
            if connection.vendor == "postgresql":
                with other_connection.cursor() as cursor:
                    cursor.execute("SELECT pg_try_advisory_lock(%s), pg_advisory_unlock(%s)", [4242, 4242])
                    assert cursor.fetchone() == (True, True)
            from django.db import transaction

            transaction.on_commit(lambda: ran.append("now"))
            assert ran == (["now"] if connection.vendor == "postgresql" else [])
        sent = [q["sql"] for q in captured.captured_queries]
        if connection.vendor == "postgresql":
            # One round trip, its own BEGIN and COMMIT in it.
            assert seen == 1 and [len(trip) for trip in trips] == [len(sent) + 2], trips
            assert trips[0][0] == "BEGIN" and trips[0][-1] == "COMMIT", trips
            assert not [q for q in sent if q in ("BEGIN", "COMMIT")], sent
        else:  # SQLite runs statements one by one: an atomic block of its own
            assert seen == 0 and sent[0].startswith("BEGIN") and sent[-1] == "COMMIT", sent
        assert ran == ["now"] and _rows_named(other_connection, "m-commit") == 1

    def test_a_statement_that_fails_rolls_the_whole_message_back(self, ci_bot: Any, other_connection: Any) -> None:
        from django.db import DatabaseError

        from approvals.written import message_transaction, run_together

        failing: tuple[str, list[Any]] = ("SELECT * FROM gatehouse_no_such_table", [])
        with pytest.raises(DatabaseError), message_transaction():
            run_together(_message(ci_bot.agent, "m-fail", failing))
        assert _rows_named(other_connection, "m-fail") == 0
        with message_transaction():  # the connection is usable, and free of any transaction
            run_together(_message(ci_bot.agent, "m-after"))
        assert _rows_named(other_connection, "m-after") == 1
        assert connection.get_autocommit() and not connection.in_atomic_block

    def test_a_second_statement_is_refused_before_it_is_sent(self, ci_bot: Any, other_connection: Any) -> None:
        from django.db.transaction import TransactionManagementError

        from approvals.written import message_transaction, run_together

        if connection.vendor != "postgresql":
            with message_transaction():  # SQLite: an atomic block, where a second statement belongs
                run_together(_message(ci_bot.agent, "m-two-a"))
                run_together(_message(ci_bot.agent, "m-two-b"))
            assert _rows_named(other_connection, "m-two-a") == _rows_named(other_connection, "m-two-b") == 1
            return
        with pytest.raises(TransactionManagementError, match="one message"), message_transaction():
            run_together(_message(ci_bot.agent, "m-two-a"))
            run_together(_message(ci_bot.agent, "m-two-b"))
        assert _rows_named(other_connection, "m-two-a") == 1  # the first had committed
        assert _rows_named(other_connection, "m-two-b") == 0

    @pytest.mark.parametrize("where", ["inside a transaction", "with other writes (alone=False)"])
    def test_it_is_an_atomic_block_inside_a_transaction_or_with_other_writes(
        self, ci_bot: Any, other_connection: Any, where: str
    ) -> None:
        from django.db import transaction

        from approvals.written import message_transaction, run_together

        class Undo(Exception):
            pass

        with pytest.raises(Undo):
            with transaction.atomic() if where == "inside a transaction" else contextlib.nullcontext():
                with message_transaction(alone=where == "inside a transaction"):
                    run_together(_message(ci_bot.agent, "m-atomic-a"))
                    run_together(_message(ci_bot.agent, "m-atomic-b"))
                    assert _rows_named(other_connection, "m-atomic-a") == 0  # not committed yet
                raise Undo
        rows = _rows_named(other_connection, "m-atomic-a") + _rows_named(other_connection, "m-atomic-b")
        assert rows == (0 if where == "inside a transaction" else 2)
