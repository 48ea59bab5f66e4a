"""The audit log's hash chain: each row's hash covers its content and the row before it.

Editing, deleting or re-ordering a committed row breaks the chain at that row, which
`manage.py audit_verify` reports.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection

from approvals.models import AuditCut, Decision

GENESIS_HASH = "0" * 64


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def input_hash(tool_input: Any) -> str:
    return hashlib.sha256(canonical_json(tool_input).encode()).hexdigest()


def chained_fields(decision: Decision) -> dict[str, Any]:
    """The fields a row's hash covers (everything that says what was decided and why)."""
    return {
        "request": str(decision.request_id),
        "agent": decision.agent_id,
        "team": decision.team_id,
        "tool_name": decision.tool_name,
        "session_id": decision.session_id,
        "behavior": decision.behavior,
        "message": decision.message,
        "updated_input": decision.updated_input,
        "reason_type": decision.reason_type,
        "reason": decision.reason,
        "rule": decision.rule,
        "rule_source": decision.rule_source,
        "decided_by": decision.decided_by,
        "decided_by_user": decision.decided_by_user_id,
        "surface": decision.surface,
        "latency_ms": round(decision.latency_ms, 3),
        "created_at": decision.created_at.isoformat(),
    }


def row_hash(decision: Decision, prev_hash: str) -> str:
    payload = prev_hash + "\n" + canonical_json(chained_fields(decision))
    return hashlib.sha256(payload.encode()).hexdigest()


# An arbitrary constant naming the audit chain's advisory lock on PostgreSQL.
CHAIN_LOCK_KEY = 0x6761746568


def lock_chain_head() -> None:
    """Serialise appends to the chain until this transaction ends (PostgreSQL only).

    - Call inside `transaction.atomic()`. SQLite needs nothing: its IMMEDIATE
      transactions already take the database's single write lock at BEGIN.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_KEY])


def chain_start() -> str:
    """The hash the live table's first row follows: the last archive cut's head, or genesis."""
    cut = AuditCut.objects.order_by("-through_id").values_list("head_hash", flat=True).first()
    return cut or GENESIS_HASH


def chain_head() -> str:
    last = Decision.objects.order_by("-id").values_list("hash", flat=True).first()
    return last or chain_start()


@dataclass(frozen=True)
class ChainBreak:
    decision_id: int
    problem: str


def verify_chain(batch_size: int = 2000) -> Iterator[ChainBreak]:
    """Yield every place where the stored chain disagrees with the rows' content."""
    # Rows archived by `manage.py audit_archive` left a cut: the chain goes on from its head.
    expected_prev = chain_start()
    rows = Decision.objects.order_by("id").iterator(chunk_size=batch_size)
    for decision in rows:
        if decision.prev_hash != expected_prev:
            yield ChainBreak(decision.pk, "prev_hash does not match the previous row's hash (removed or re-ordered)")
        if row_hash(decision, decision.prev_hash) != decision.hash:
            yield ChainBreak(decision.pk, "hash does not match the row's content (row edited)")
        expected_prev = decision.hash


def verify_row(decision: Decision) -> bool:
    """Whether one row's content still matches its stored hash (the detail page's badge)."""
    return row_hash(decision, decision.prev_hash) == decision.hash
