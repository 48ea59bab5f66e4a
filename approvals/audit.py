"""The audit log's hash chain: each row's hash covers its content and the row before it.

Editing, deleting or re-ordering a committed row breaks the chain at that row, which
`manage.py audit_verify` reports.

Each row stores the `format` its hash was computed under, so the chain can grow:

- format 1 (rows written before format 2 existed): the decision's own fields.
- format 2: the decision's fields and everything a reviewer reads of its request — the
  tool and its input, cwd, session, agent name, mode, context and the engine's stored
  evaluation (its trace), and the agent's reported facts. The format number itself is hashed, so a row cannot be
  relabelled to an older, narrower format without breaking.

- format 3: format 2, and the row's `kind` (a decision, a quorum vote, an escalation
  ladder step), so a vote cannot be relabelled as the outcome or the other way round.

Old rows keep format 1 and are verified by it: re-hashing them would bless whatever was
changed in them before the upgrade (see SECURITY.md). A format never goes backwards
along the chain; `verify_chain` reports a row whose format is older than the row before it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, connection
from django.utils import timezone

from approvals.audit_search import search_text
from approvals.models import AuditKind, AuditSearch, Decision, PermissionRequest
from approvals.written import Statement, WrittenInsert, run_together

log = logging.getLogger(__name__)

GENESIS_HASH = "0" * 64
CURRENT_FORMAT = 3
# Numbers at or beyond this size are compared as floats (see `stable_numbers`).
EXACT_INT_LIMIT = 2**53


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def input_hash(tool_input: Any) -> str:
    return hashlib.sha256(canonical_json(tool_input).encode()).hexdigest()


def stable_numbers(value: Any) -> Any:
    """JSON with every number in the one form it has after a trip through the database.

    PostgreSQL's jsonb stores numbers as decimals: `-0.0` comes back `0`, `1e100` comes
    back an integer. The hash is computed before the trip and verified after it, so
    integral floats become ints and huge ints become floats on both sides.
    """
    if isinstance(value, dict):
        return {key: stable_numbers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [stable_numbers(item) for item in value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if abs(value) >= EXACT_INT_LIMIT:
        return float(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def decision_fields(decision: Decision) -> dict[str, Any]:
    """Format 1: the decision's own fields (what was decided and why)."""
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


# What of a request format 2 covers: everything fixed by the time it is decided. The
# request's state, version and tool result change afterwards and are not covered.
REQUEST_FIELDS = (
    "tool_use_id",
    "tool_name",
    "tool_input",
    "input_hash",
    "session_id",
    "cwd",
    "permission_mode",
    "context",
    "transcript_path",
    "evaluation",
    "permission_suggestions",
)
# In format 2's request part when set (the agent's reported facts): left out when null,
# so a row hashed before the request had such a field still verifies, while a value
# written into it, or one removed, breaks the row.
OPTIONAL_REQUEST_FIELDS = ("facts", "call_context")


def request_fields(request: PermissionRequest) -> dict[str, Any]:
    """Format 2's request part: what the card, the audit page and the API show of the call."""
    fields = {name: getattr(request, name) for name in REQUEST_FIELDS}
    for name in OPTIONAL_REQUEST_FIELDS:
        if getattr(request, name, None) is not None:
            fields[name] = getattr(request, name)
    fields["agent_name"] = request.agent.name
    fields["created_at"] = request.created_at.isoformat()
    return stable_numbers(fields)


def chained_fields(decision: Decision) -> dict[str, Any]:
    """The payload a row's hash covers, by the row's own format (JSON-native values)."""
    fields = decision_fields(decision)
    if decision.format == 1:
        return fields
    if decision.format not in (2, 3):
        raise ValueError(f"unknown audit row format {decision.format}")
    if decision.format == 3:
        fields["kind"] = decision.kind
    return {
        "format": decision.format,
        "decision": stable_numbers(fields),
        "request": request_fields(decision.request),
    }


def payload_hash(prev_hash: str, fields: dict[str, Any]) -> str:
    return chain_hash(prev_hash, canonical_json(fields))


def chain_hash(prev_hash: str, payload: str) -> str:
    """A row's hash: SHA-256 of the previous row's hash, a newline and its canonical JSON.

    - The database computes the same as `gatehouse_chain_hash(prev, payload)` when a row is
      appended: PostgreSQL in SQL (migration 0025), SQLite by calling this function
      (registered on each connection, approvals.apps). `tests/approvals/test_audit_chain.py`
      holds the two to each other.
    """
    return hashlib.sha256((prev_hash + "\n" + payload).encode()).hexdigest()


def row_hash(decision: Decision, prev_hash: str) -> str:
    return payload_hash(prev_hash, chained_fields(decision))


# An arbitrary constant naming the audit chain's advisory lock on PostgreSQL.
CHAIN_LOCK_KEY = 0x6761746568


def lock_chain_head() -> None:
    """Serialise appends to the chain until this transaction ends (PostgreSQL only).

    - Call inside `transaction.atomic()`. SQLite needs nothing: its IMMEDIATE
      transactions already take the database's single write lock at BEGIN.
    """
    run_together(_chain_lock())


def _chain_lock() -> list[Statement]:
    return [("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_KEY])] if connection.vendor == "postgresql" else []


# The hash the live table's first row follows: the last archive cut's head, else genesis
# (its one parameter).
CHAIN_START = "COALESCE((SELECT head_hash FROM approvals_auditcut ORDER BY through_id DESC LIMIT 1), %s)"


def chain_start() -> str:
    """The hash the live table's first row follows: the last archive cut's head, or genesis."""
    return str(run_together([(f"SELECT {CHAIN_START}", [GENESIS_HASH])])[0][0][0])


# The chain's head as an append reads it: the newest row's hash, else `CHAIN_START` (its
# one parameter is genesis). Read under the chain's lock.
CHAIN_HEAD = f"COALESCE((SELECT hash FROM approvals_decision ORDER BY id DESC LIMIT 1), {CHAIN_START})"  # noqa: S608


def chain_head() -> str:
    return str(run_together([(f"SELECT {CHAIN_HEAD}", [GENESIS_HASH])])[0][0][0])


@dataclass(frozen=True)
class ChainBreak:
    decision_id: int
    problem: str


def verify_chain(batch_size: int = 2000) -> Iterator[ChainBreak]:
    """Yield every place where the stored chain disagrees with the rows' content."""
    # Rows archived by `manage.py audit_archive` left a cut: the chain goes on from its head.
    expected_prev, last_format = chain_start(), 1
    rows = Decision.objects.select_related("request__agent").order_by("id").iterator(chunk_size=batch_size)
    for decision in rows:
        if decision.prev_hash != expected_prev:
            yield ChainBreak(decision.pk, "prev_hash does not match the previous row's hash (removed or re-ordered)")
        if decision.format < last_format:
            yield ChainBreak(decision.pk, f"format {decision.format} after a format {last_format} row (downgraded)")
        if not verify_row(decision):
            yield ChainBreak(decision.pk, "hash does not match the row's content or its request's (row edited)")
        expected_prev, last_format = decision.hash, max(last_format, decision.format)


def verify_row(decision: Decision) -> bool:
    """Whether one row's content (and, from format 2, its request's) still matches its stored hash."""
    try:
        return row_hash(decision, decision.prev_hash) == decision.hash
    except ValueError:  # an unknown format: nothing vouches for the row
        return False


# --- appending -------------------------------------------------------------------------


def append_decision(
    request: PermissionRequest,
    *,
    behavior: str,
    message: str,
    reason: dict[str, Any],
    decided_by: str,
    surface: str,
    updated_input: dict[str, Any] | None = None,
    user: User | None = None,
    latency_ms: float | None = None,
    kind: str = AuditKind.DECISION,
    new_request: bool = False,
    first: Sequence[Statement] = (),
) -> Decision:
    """Write the audit row at the head of the hash chain. Call inside `transaction.atomic()`,
    or inside `written.message_transaction()` when the row is the transaction's only write.

    - `kind`: a `decision` row is the request's outcome and becomes `request.decision`;
      a vote or a ladder step is a row on the way to it.
    - `new_request`: the request is not stored yet (a call decided at submit). It is
      inserted with its audit row, naming it, rather than inserted first and updated to
      name it: one statement and one round trip fewer. The foreign keys between the two
      are checked at commit.
    - `first`: statements sent ahead of the chain's lock in the same message (a person's
      decision's fence, which raises there when it moved nothing, so nothing is written).
    """
    # First, as `save` would: the request's `created_at`, which the row's hash covers.
    request_insert = _NEW_REQUEST_INSERT.statement(request) if new_request else None
    now = timezone.now()
    if latency_ms is None:
        latency_ms = (now - request.created_at).total_seconds() * 1000
    fields = {
        "request": request,
        "agent_id": request.agent_id,
        "team_id": request.team_id,
        "tool_name": request.tool_name,
        "session_id": request.session_id,
        "behavior": behavior,
        "message": message,
        "updated_input": updated_input,
        "reason_type": str(reason.get("type", "other")),
        "reason": reason,
        "rule": str(reason.get("rule", ""))[:4096],
        "rule_source": str(reason.get("source", ""))[:32] if reason.get("rule") else "",
        "decided_by": decided_by[:150],
        "decided_by_user": user,
        "surface": surface,
        "latency_ms": latency_ms,
        "created_at": now,
        "kind": kind,
        "format": CURRENT_FORMAT,
    }
    # Writers never race for the head: on PostgreSQL they queue on an advisory lock held
    # to commit, and SQLite's IMMEDIATE transactions hold its one write lock from BEGIN.
    # So no savepoint and no retry: should a writer that bypassed the lock ever read the
    # same head, the unique prev_hash refuses the second insert, its whole transaction
    # rolls back and the caller denies (AuditUnavailable); the chain never forks.
    decision = Decision(**fields)
    # What the hash covers (the request too, its agent's name read here) and the row's
    # search text are gathered before the chain's lock. The lock is held to commit, and
    # every append waits for it, so what happens under it is one round trip and the
    # commit (in a message transaction the message's own end commits it): the lock, then
    # the row, its hash computed by the database from the head it reads (`chain_hash`; a
    # statement's snapshot is taken when it starts, so it sees every append committed
    # before the lock was granted), its search text and the request naming it.
    payload = canonical_json(chained_fields(decision))
    text = search_text(request.tool_name, request.tool_input, message=decision.message, rule=decision.rule)
    try:
        _DECISION_INSERT.insert(
            decision,
            before=[*first, *_chain_lock()],
            then=_chain_links(text, request, kind, request_insert),
            computed=[GENESIS_HASH, GENESIS_HASH, payload],
        )
    except IntegrityError as exc:
        if not new_request:  # a new request's may be a replay of its call: the caller judges
            log.error("audit insert refused for request %s: %s", request.pk, exc)
        raise
    if request_insert is not None:
        _NEW_REQUEST_INSERT.inserted(request)
    if kind == AuditKind.DECISION:
        request.decision = decision
    return decision


# The audit log's statements, on every decision's path: written out once per process
# (approvals.written); `Decision.save` refuses updates, and these only insert.
_DECISION_INSERT = WrittenInsert(
    Decision, computed={"prev_hash": CHAIN_HEAD, "hash": f"gatehouse_chain_hash({CHAIN_HEAD}, %s)"}
)
# The chain's newest row: under the chain's lock, the row just appended.
NEWEST_ROW = "SELECT id FROM approvals_decision ORDER BY id DESC LIMIT 1"
# A request decided at submit, stored with its audit row and naming it (`new_request`).
_NEW_REQUEST_INSERT = WrittenInsert(PermissionRequest, computed={"decision": NEWEST_ROW})
_LINKS: dict[str, tuple[str, str]] = {}


def _chain_links(
    text: str, request: PermissionRequest, kind: str, request_insert: Statement | None = None
) -> list[Statement]:
    """The row's search text (approvals.audit_search) and, for a decision, the request naming
    it: `request_insert` for a new request, else an update of the stored one.

    They go with the row's insert, before its id is known, and find it as the chain's
    newest row: under the chain's lock nobody else appends.
    """
    found = _LINKS.get(connection.vendor)
    if found is None:
        quote, row, search, req = connection.ops.quote_name, Decision._meta, AuditSearch._meta, PermissionRequest._meta
        pk = quote(row.pk.column)
        newest = f"SELECT {pk} FROM {quote(row.db_table)} ORDER BY {pk} DESC LIMIT 1"  # noqa: S608
        found = _LINKS[connection.vendor] = (
            f"INSERT INTO {quote(search.db_table)} ({quote(search.get_field('decision').column)},"  # noqa: S608
            f" {quote(search.get_field('text').column)}) VALUES (({newest}), %s)",
            f"UPDATE {quote(req.db_table)} SET {quote(req.get_field('decision').column)} = ({newest})"  # noqa: S608
            f" WHERE {quote(req.pk.column)} = %s",
        )
    index, names = found
    statements: list[Statement] = [(index, [text])]
    if request_insert is not None:
        statements.append(request_insert)
    elif kind == AuditKind.DECISION:
        request_pk = PermissionRequest._meta.pk
        assert request_pk is not None
        statements.append((names, [request_pk.get_db_prep_value(request.pk, connection)]))
    return statements
