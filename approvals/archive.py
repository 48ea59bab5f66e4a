"""Retention for the audit log: move its oldest rows into compressed JSONL, chain intact.

`archive_before(before, directory)` takes the longest prefix of the chain whose rows
are older than `before`, checks it, writes it (with each row's request) to
`audit-<first>-<last>.jsonl.gz`, records the cut (`AuditCut`: the hash the live chain
continues from, the file's SHA-256) and deletes the rows — all in one transaction, the
only one allowed past the append-only trigger (migration 0006). `verify_archives`
re-walks the files; `audit.verify_chain` starts the live table at the last cut's head.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from django.db import connection, transaction

from approvals.audit import GENESIS_HASH, chain_start, chained_fields, lock_chain_head, payload_hash, row_hash
from approvals.models import AuditCut, Decision, PermissionRequest

log = logging.getLogger(__name__)

FORMAT = "gatehouse-audit-archive"
VERSION = 1
BATCH = 2000


class ArchiveRefused(Exception):
    """The prefix to archive does not verify: archiving it would hide the break."""


@dataclass(frozen=True)
class ArchiveResult:
    cut: AuditCut | None
    path: Path | None


def request_fields(request: PermissionRequest) -> dict[str, Any]:
    return {field.attname: getattr(request, field.attname) for field in PermissionRequest._meta.concrete_fields}


def _archive_line(decision: Decision) -> str:
    row = {
        "id": decision.pk,
        "format": decision.format,
        "prev_hash": decision.prev_hash,
        "hash": decision.hash,
        "fields": chained_fields(decision),
        "request": request_fields(decision.request),
    }
    return json.dumps(row, sort_keys=True, ensure_ascii=False, default=str) + "\n"


def _write_prefix(out: IO[str], before: datetime, start: str) -> tuple[int, int, int, str]:
    """Write the rows older than `before`, in chain order; return first id, last id, count, head."""
    first = last = count = 0
    head = start
    for decision in Decision.objects.select_related("request__agent").order_by("id").iterator(chunk_size=BATCH):
        if decision.created_at >= before:
            break  # a prefix only: the chain must stay one piece
        if decision.prev_hash != head or row_hash(decision, decision.prev_hash) != decision.hash:
            raise ArchiveRefused(f"decision {decision.pk} does not verify; run audit_verify before archiving")
        out.write(_archive_line(decision))
        first, last, count, head = first or decision.pk, decision.pk, count + 1, decision.hash
    return first, last, count, head


def _delete_through(through_id: int) -> None:
    request_ids = list(Decision.objects.filter(id__lte=through_id).values_list("request_id", flat=True))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The trigger's one exception, for this transaction only (SET LOCAL).
            cursor.execute("SELECT set_config('gatehouse.audit_archive_through', %s, true)", [str(through_id)])
        # The search text derived from the rows goes with them (approvals.audit_search).
        cursor.execute("DELETE FROM approvals_auditsearch WHERE decision_id <= %s", [through_id])
        cursor.execute("DELETE FROM approvals_decision WHERE id <= %s", [through_id])
    request_ids = list(dict.fromkeys(request_ids))  # its votes, its decision and its autopilot row name it each
    for start in range(0, len(request_ids), 500):
        # Through the ORM, so rows that hang off a request (chat messages) go with it. A
        # request whose later rows (its decision after its votes, a promotion after it) stay live stays too.
        batch = request_ids[start : start + 500]
        PermissionRequest.objects.filter(pk__in=batch, audit_rows__isnull=True).delete()


def archive_before(before: datetime, directory: Path) -> ArchiveResult:
    """Move every audit row older than `before` (a prefix of the chain) into a new archive file."""
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".audit-archive-{os.getpid()}.partial"
    with transaction.atomic():
        lock_chain_head()  # no append, and no other archive, moves the chain meanwhile
        start = chain_start()
        with gzip.open(partial, "wt", encoding="utf-8") as out:
            out.write(json.dumps({"format": FORMAT, "version": VERSION, "start_hash": start}) + "\n")
            first, through, count, head = _write_prefix(out, before, start)
        if count == 0:
            partial.unlink()
            return ArchiveResult(None, None)
        path = directory / f"audit-{first:012d}-{through:012d}.jsonl.gz"
        os.replace(partial, path)
        cut = AuditCut.objects.create(
            before=before,
            first_id=first,
            through_id=through,
            rows=count,
            start_hash=start,
            head_hash=head,
            file_name=path.name,
            file_sha256=file_sha256(path),
        )
        _delete_through(through)
    log.warning("audit archive: decisions %d..%d (%d rows) moved to %s", first, through, count, path)
    return ArchiveResult(cut, path)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as raw:
        for block in iter(lambda: raw.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify_file(cut: AuditCut, path: Path) -> Iterator[str]:
    if not path.exists():
        yield f"{cut.file_name}: missing"
        return
    if file_sha256(path) != cut.file_sha256:
        yield f"{cut.file_name}: its SHA-256 is not the one recorded at the cut (file changed)"
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        header = json.loads(next(lines))
        head, count = header.get("start_hash"), 0
        for line in lines:
            row = json.loads(line)
            expected = payload_hash(row["prev_hash"], row["fields"])
            if row["prev_hash"] != head or expected != row["hash"]:
                yield f"{cut.file_name}: decision {row['id']} breaks the chain"
            head, count = row["hash"], count + 1
    if head != cut.head_hash or count != cut.rows:
        yield f"{cut.file_name}: ends at a different head or row count than its cut"


def verify_archives(directory: Path) -> Iterator[str]:
    """Yield every problem in the archive files of every cut, and in how they join up."""
    expected_start = GENESIS_HASH
    for cut in AuditCut.objects.order_by("through_id"):
        if cut.start_hash != expected_start:
            yield f"{cut.file_name}: does not start where the previous archive ended"
        yield from _verify_file(cut, directory / cut.file_name)
        expected_start = cut.head_hash
