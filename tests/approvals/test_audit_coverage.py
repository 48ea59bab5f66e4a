"""The hash chain covers every field a reviewer reads: the decision's and its request's.

A table of every covered field: each is rewritten below the ORM, as an attacker with
database access would, and `audit_verify` and the audit page must both say so.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from approvals import services
from approvals.audit import GENESIS_HASH, chain_head, row_hash, stable_numbers
from approvals.models import AuditKind, Decision, PermissionRequest
from tests.approvals.audit_helpers import tamper

CALL = {
    "tool_name": "Bash",
    "tool_input": {"command": "make build"},
    "session_id": "s-1",
    "cwd": "/srv/app",
    "permission_mode": "default",
}

# (column, new value): every request column the chain covers, rewritten plausibly.
REQUEST_COLUMNS = [
    ("tool_use_id", "toolu_other"),
    ("tool_name", "Write"),
    ("tool_input", json.dumps({"command": "rm -rf /"})),
    ("input_hash", "0" * 64),
    ("session_id", "s-2"),
    ("cwd", "/"),
    ("permission_mode", "bypassPermissions"),
    ("context", "headless"),
    ("transcript_path", "/tmp/other.jsonl"),
    ("evaluation", json.dumps({"trace": [{"step": "allowRules", "rule": "Bash"}]})),
    ("permission_suggestions", json.dumps([{"type": "addRules"}])),
    ("created_at", "2020-01-01 00:00:00"),
    ("facts", json.dumps({"home": "/root", "user": "root"})),
]
# Every decision column the chain covers (the foreign keys other than the user by id).
DECISION_COLUMNS = [
    ("tool_name", "Read"),
    ("session_id", "s-2"),
    ("behavior", "deny"),
    ("message", "nothing to see"),
    ("updated_input", json.dumps({"command": "true"})),
    ("reason_type", "rule"),
    ("reason", json.dumps({"type": "rule", "rule": "Bash"})),
    ("rule", "Bash"),
    ("rule_source", "policySettings"),
    ("decided_by", "mallory"),
    ("surface", "telegram"),
    ("latency_ms", 1234.5),
    ("created_at", "2020-01-01 00:00:00"),
    ("format", 1),
    ("kind", "vote"),  # an outcome relabelled as a quorum vote, or the other way round
]

# An autopilot promotion's row: the rule it saved, its trial expiry and why, each rewritten.
AUTOPILOT_COLUMNS = [
    ("rule", "Bash"),  # a wider rule than the one saved
    ("reason", "expires_at"),  # the trial's end moved a year on (the value is made below)
    ("reason", "rule"),
    ("message", "autopilot saved Bash(make build:*) for a 7-day trial"),
    ("decided_by", "alice"),
    ("kind", "vote"),
    ("request_id", "other"),  # pinned on another request
]


def decide(agent: Any, alice: Any, tool_use_id: str, **call: Any) -> Decision:
    result = services.request_submit(agent=agent, call={**CALL, "tool_use_id": tool_use_id, **call})
    assert result.decision is None  # no rule: a person decides
    decided = services.request_decide(result.request.pk, services.Answer(behavior="allow", surface="web", user=alice))
    assert decided.decision is not None
    return decided.decision


def verify() -> str:
    try:
        call_command("audit_verify", stdout=io.StringIO(), stderr=io.StringIO())
    except CommandError as exc:
        return str(exc)
    return ""


def page_says(user: Any, row: Decision) -> str:
    client = Client()
    client.force_login(user)
    return client.get(f"/audit/{row.pk}/").content.decode()


@pytest.mark.django_db
class AuditCoverageTests:
    @pytest.mark.parametrize(("column", "value"), REQUEST_COLUMNS, ids=[c for c, _ in REQUEST_COLUMNS])
    def test_it_finds_a_rewritten_request_field(self, alice: Any, ci_bot: Any, column: str, value: Any) -> None:
        rows = [decide(ci_bot.agent, alice, f"cover_{n}") for n in range(3)]
        assert verify() == ""
        with tamper() as cursor:
            cursor.execute(
                f"UPDATE approvals_permissionrequest SET {column} = %s WHERE id = %s",  # noqa: S608
                [value, rows[1].request_id.hex],
            )
        assert "broken in 1 place" in verify()
        assert "Broken" in page_says(alice, rows[1])
        assert "Intact" in page_says(alice, rows[0])

    @pytest.mark.parametrize(("column", "value"), DECISION_COLUMNS, ids=[c for c, _ in DECISION_COLUMNS])
    def test_it_finds_a_rewritten_decision_field(self, alice: Any, ci_bot: Any, column: str, value: Any) -> None:
        rows = [decide(ci_bot.agent, alice, f"cover_{n}") for n in range(3)]
        with tamper() as cursor:
            cursor.execute(f"UPDATE approvals_decision SET {column} = %s WHERE id = %s", [value, rows[1].pk])  # noqa: S608
        assert verify() != ""
        assert "Broken" in page_says(alice, rows[1])

    @pytest.mark.parametrize(
        ("column", "value"), AUTOPILOT_COLUMNS, ids=[f"{c}-{v[:12]}" for c, v in AUTOPILOT_COLUMNS]
    )
    def test_it_finds_a_rewritten_autopilot_promotion(self, alice: Any, ci_bot: Any, column: str, value: str) -> None:
        services.autopilot_configure(team=services.default_team(), enabled=True, approvals=2, trial_hours=24)
        rows = [decide(ci_bot.agent, alice, f"cover_{n}", session_id=f"s-{n}") for n in range(2)]
        rows.append(decide(ci_bot.agent, alice, "cover_2", tool_input={"command": "make lint"}))  # a row after it
        [promotion] = Decision.objects.filter(kind=AuditKind.AUTOPILOT)
        assert promotion.request_id == rows[1].request_id and promotion.rule == "Bash(make build:*)"
        assert verify() == ""
        if column == "reason":
            reason = dict(promotion.reason)
            reason[value] = "2099-01-01T00:00:00+00:00" if value == "expires_at" else "Bash"
            column, value = "reason", json.dumps(reason)
        elif column == "request_id":
            value = rows[0].request_id.hex
        with tamper() as cursor:
            cursor.execute(
                f"UPDATE approvals_decision SET {column} = %s WHERE id = %s",  # noqa: S608
                [value, promotion.pk],
            )
        assert "broken in 1 place" in verify()
        assert "Broken" in page_says(alice, promotion)

    def test_it_finds_a_renamed_agent(self, alice: Any, ci_bot: Any) -> None:
        row = decide(ci_bot.agent, alice, "cover_0")
        with tamper() as cursor:
            cursor.execute("UPDATE approvals_agent SET name = 'trusted-bot' WHERE id = %s", [ci_bot.agent.pk])
        assert "broken in 1 place" in verify()
        assert "Broken" in page_says(alice, row)

    def test_it_finds_reported_facts_rewritten_or_removed(self, alice: Any, ci_bot: Any) -> None:
        facts = {"home": "/home/ci", "user": "ci"}
        submitted = services.request_submit(agent=ci_bot.agent, call={**CALL, "tool_use_id": "facts", "facts": facts})
        decided = services.request_decide(
            submitted.request.pk, services.Answer(behavior="allow", surface="web", user=alice)
        )
        assert decided.decision is not None and PermissionRequest.objects.get(pk=submitted.request.pk).facts
        assert verify() == ""
        for value in (json.dumps({"home": "/root", "user": "ci"}), None):
            with tamper() as cursor:
                cursor.execute(
                    "UPDATE approvals_permissionrequest SET facts = %s WHERE id = %s",
                    [value, submitted.request.pk.hex],
                )
            assert "broken in 1 place" in verify(), value

    def test_it_writes_new_rows_at_the_current_format(self, alice: Any, ci_bot: Any) -> None:
        row = decide(ci_bot.agent, alice, "cover_0")
        assert Decision.objects.get(pk=row.pk).format == 3


@pytest.mark.django_db
class AuditFormatTests:
    def test_it_verifies_an_old_row_by_its_own_format(self, alice: Any, ci_bot: Any) -> None:
        """A row written before format 2 (it covers only the decision) still verifies, then the chain goes on."""
        pending = services.request_submit(agent=ci_bot.agent, call={**CALL, "tool_use_id": "old"}).request
        old = Decision(
            request=pending,
            agent=ci_bot.agent,
            team=ci_bot.agent.team,
            tool_name=pending.tool_name,
            behavior="allow",
            reason_type="user",
            decided_by="alice",
            surface="web",
            created_at=pending.created_at,
            format=1,
            prev_hash=chain_head(),
        )
        old.hash = row_hash(old, old.prev_hash)
        old.save(force_insert=True)
        PermissionRequest.objects.filter(pk=pending.pk).update(state="decided")
        assert old.prev_hash == GENESIS_HASH
        new = decide(ci_bot.agent, alice, "new")
        assert verify() == ""
        # The page says what an old row's "Intact" does not vouch for.
        assert "covers the decision only" in page_says(alice, old)
        assert "covers the decision only" not in page_says(alice, new)

    def test_it_finds_an_unknown_format(self, alice: Any, ci_bot: Any) -> None:
        row = decide(ci_bot.agent, alice, "cover_0")
        with tamper() as cursor:
            cursor.execute("UPDATE approvals_decision SET format = 99 WHERE id = %s", [row.pk])
        assert "broken in 1 place" in verify()


class StableNumbersTests:
    @pytest.mark.parametrize(
        ("before", "after_db"),
        [(-0.0, 0), (1e100, 10**100), (2.0, 2), (1.5, 1.5), (10**20, 1e20), (True, True), ("1", "1")],
    )
    def test_it_gives_a_number_one_form_before_and_after_the_database(self, before: Any, after_db: Any) -> None:
        assert json.dumps(stable_numbers({"x": [before]})) == json.dumps(stable_numbers({"x": [after_db]}))
