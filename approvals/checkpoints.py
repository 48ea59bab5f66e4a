"""Signed checkpoints of the audit chain's head, kept outside the database.

The hash chain finds an edited or removed row in the middle, but not a cut tail: delete
the newest rows (or TRUNCATE the table) and what is left still links up. So the sweeper
(`manage.py run_sweeper`) appends, every `GATEHOUSE_CHECKPOINT_ROWS` rows or
`GATEHOUSE_CHECKPOINT_MINUTES` minutes, one JSON line to `GATEHOUSE_CHECKPOINT_FILE`:

    {"v": 1, "head_id": 812, "head_hash": "…", "rows": 812, "at": "…", "sig": "<base64>"}

signed with an Ed25519 key (`GATEHOUSE_CHECKPOINT_KEY_FILE`) that only the sweeper's
user can read. `audit_verify` checks every line's signature with the public key and that
the row each one vouches for is still there with the same hash, so a cut tail, a
TRUNCATE or a re-computed chain is found. Someone with the database but not the key
cannot forge a line; someone who deletes lines is caught by the file's off-host copy.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from approvals.audit import canonical_json
from approvals.models import AuditCut, Decision

log = logging.getLogger(__name__)

VERSION = 1


class CheckpointError(Exception):
    """A key or checkpoint file that cannot be used."""


@dataclass(frozen=True)
class Head:
    head_id: int
    head_hash: str
    rows: int


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    """The signing key; refused when anyone but its owner may read it."""
    try:
        mode = os.stat(path).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CheckpointError(f"{path}: the checkpoint key must be readable by its owner only (chmod 600)")
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: cannot read the checkpoint key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise CheckpointError(f"{path}: not an Ed25519 private key")
    return key


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: cannot read the checkpoint public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise CheckpointError(f"{path}: not an Ed25519 public key")
    return key


def new_key_pair() -> tuple[bytes, bytes]:
    """A fresh Ed25519 key pair as PEM: (private, public)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


def archived_rows() -> int:
    return AuditCut.objects.aggregate(total=Sum("rows"))["total"] or 0


def current_head() -> Head:
    """The chain's newest row and how many rows the chain holds up to it (archived ones too)."""
    newest = Decision.objects.order_by("-id").values_list("id", "hash").first()
    if newest is None:
        cut = AuditCut.objects.order_by("-through_id").values_list("through_id", "head_hash").first()
        head_id, head_hash = cut or (0, "")
        return Head(head_id, head_hash, archived_rows())
    live = Decision.objects.filter(id__lte=newest[0]).count()
    return Head(newest[0], newest[1], archived_rows() + live)


def signed_line(head: Head, key: Ed25519PrivateKey) -> dict[str, Any]:
    body = {"v": VERSION, "head_id": head.head_id, "head_hash": head.head_hash, "rows": head.rows}
    body["at"] = timezone.now().isoformat()
    signature = key.sign(canonical_json(body).encode())
    return {**body, "sig": base64.b64encode(signature).decode()}


def append_line(path: Path, line: dict[str, Any]) -> None:
    """Append one checkpoint and make it durable before returning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())


def write_checkpoint(key: Ed25519PrivateKey, path: Path | None = None) -> dict[str, Any]:
    """Sign the chain's current head and append it to the checkpoint file."""
    line = signed_line(current_head(), key)
    append_line(path or settings.GATEHOUSE_CHECKPOINT_FILE, line)
    return line


@dataclass
class CheckpointWriter:
    """The sweeper's schedule: a checkpoint every `rows` new rows or `minutes` minutes."""

    key: Ed25519PrivateKey
    path: Path
    rows: int
    minutes: int
    last_id: int = -1
    last_at: datetime = field(default_factory=timezone.now)

    def due(self, new_rows: int, now: datetime) -> bool:
        if self.last_id < 0:
            return True  # the first pass writes one, so a fresh deployment starts anchored
        return new_rows >= self.rows or now - self.last_at >= timedelta(minutes=self.minutes)

    def maybe_write(self) -> bool:
        # Counted, not an id difference: ids have gaps (PostgreSQL sequences skip).
        new_rows = Decision.objects.filter(id__gt=self.last_id).count() if self.last_id >= 0 else 0
        now = timezone.now()
        if not self.due(new_rows, now):
            return False
        line = write_checkpoint(self.key, self.path)
        self.last_id, self.last_at = line["head_id"], now
        return True


def checkpoint_writer() -> CheckpointWriter | None:
    """The sweeper's writer, or None when no checkpoint key is configured."""
    if not settings.GATEHOUSE_CHECKPOINT_KEY_FILE:
        return None
    key = load_private_key(settings.GATEHOUSE_CHECKPOINT_KEY_FILE)
    return CheckpointWriter(
        key,
        settings.GATEHOUSE_CHECKPOINT_FILE,
        settings.GATEHOUSE_CHECKPOINT_ROWS,
        settings.GATEHOUSE_CHECKPOINT_MINUTES,
    )


@dataclass(frozen=True)
class CheckpointReport:
    configured: bool
    checked: int
    problems: list[str]
    summary: str


def read_lines(path: Path, key: Ed25519PublicKey) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """Each line: (line number, the checkpoint if its signature holds, else None and why)."""
    with open(path, encoding="utf-8") as lines:
        for number, raw in enumerate(lines, start=1):
            try:
                line = json.loads(raw)
                body = {name: line[name] for name in ("v", "head_id", "head_hash", "rows", "at")}
                key.verify(base64.b64decode(line["sig"], validate=True), canonical_json(body).encode())
            except (ValueError, KeyError, TypeError, InvalidSignature):
                yield number, None, "not a checkpoint signed by the configured key (forged or damaged)"
                continue
            yield number, line, ""


def _check_head(line: dict[str, Any], live: dict[int, str], last_cut: int) -> str:
    """Why the database no longer holds what this checkpoint vouches for ("" when it does)."""
    head_id, head_hash = line["head_id"], line["head_hash"]
    if head_id == 0 or head_id <= last_cut:
        cut_hash = AuditCut.objects.filter(through_id=head_id).values_list("head_hash", flat=True).first()
        return "" if cut_hash in (None, head_hash) else f"archive cut at decision {head_id} has another head hash"
    if head_id not in live:
        return f"decision {head_id} is gone (the newest rows were deleted or the table truncated)"
    if live[head_id] != head_hash:
        return f"decision {head_id}'s hash differs (the chain was rewritten)"
    return ""


def _check_rows(line: dict[str, Any], last_cut: int) -> str:
    if line["head_id"] <= last_cut:
        return ""
    rows = archived_rows() + Decision.objects.filter(id__lte=line["head_id"]).count()
    return "" if rows == line["rows"] else f"{line['rows']} rows up to decision {line['head_id']}, now {rows}"


def live_hashes(ids: list[int], batch: int = 500) -> dict[int, str]:
    """The stored hash of each of these rows still in the table (batched: SQLite caps parameters)."""
    found: dict[int, str] = {}
    for start in range(0, len(ids), batch):
        found.update(Decision.objects.filter(id__in=ids[start : start + batch]).values_list("id", "hash"))
    return found


def _unanchored(newest: dict[str, Any] | None, last_cut: int, now: datetime) -> tuple[str, str]:
    """(summary, problem) of the rows after the newest checkpoint: these a cut could remove unseen.

    - A problem when such rows exist and the newest checkpoint is older than twice the
      schedule (`GATEHOUSE_CHECKPOINT_MINUTES`) plus a minute: the sweeper is not anchoring.
    """
    since_id = max(newest["head_id"] if newest else 0, last_cut)
    count = Decision.objects.filter(id__gt=since_id).count()
    if newest is None:
        return "", ""
    age = now - datetime.fromisoformat(newest["at"])
    summary = f"newest {newest['at']} ({int(age.total_seconds() // 60)} min ago); {count} rows since, not yet anchored"
    allowed = timedelta(minutes=2 * settings.GATEHOUSE_CHECKPOINT_MINUTES + 1)
    if count and age > allowed:
        problem = (
            f"{count} rows were written after the newest checkpoint ({newest['at']}), older than "
            f"{int(allowed.total_seconds() // 60)} min: is the sweeper writing checkpoints? "
            "Until one is written, deleting these rows cannot be detected"
        )
        return summary, problem
    return summary, ""


def verify_checkpoints(path: Path | None = None, *, now: datetime | None = None) -> CheckpointReport:
    """Check the chain against every signed checkpoint; say plainly when none are configured."""
    if not settings.GATEHOUSE_CHECKPOINT_PUBLIC_KEY_FILE:
        return CheckpointReport(
            False,
            0,
            [],
            "checkpoints: not configured (set GATEHOUSE_CHECKPOINT_PUBLIC_KEY_FILE): "
            "deleted newest rows or a truncated table cannot be detected",
        )
    path = path or settings.GATEHOUSE_CHECKPOINT_FILE
    key = load_public_key(settings.GATEHOUSE_CHECKPOINT_PUBLIC_KEY_FILE)
    if not path.exists() or path.stat().st_size == 0:
        return CheckpointReport(True, 0, [f"checkpoints: none at {path} (is the sweeper running with its key?)"], "")
    lines = list(read_lines(path, key))
    signed = [line for _, line, _ in lines if line is not None]
    problems = [f"checkpoint line {number}: {why}" for number, line, why in lines if line is None]
    live = live_hashes(sorted({line["head_id"] for line in signed}))
    last_cut = AuditCut.objects.order_by("-through_id").values_list("through_id", flat=True).first() or 0
    for line in signed:
        if why := _check_head(line, live, last_cut):
            problems.append(f"checkpoint of {line['at']}: {why}")
    if signed and (why := _check_rows(max(signed, key=lambda line: line["head_id"]), last_cut)):
        problems.append(f"latest checkpoint: {why}")
    newest = max(signed, key=lambda line: line["head_id"], default=None)
    window, stale = _unanchored(newest, last_cut, now or timezone.now())
    if stale:
        problems.append(f"latest checkpoint: {stale}")
    summary = f"checkpoints: {len(signed)} verified against the chain ({window or 'none signed'})"
    return CheckpointReport(True, len(signed), problems, summary)
