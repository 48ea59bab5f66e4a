"""`manage.py audit_keygen`: make the Ed25519 key pair that signs audit checkpoints."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.checkpoints import new_key_pair


def write_new(path: Path, data: bytes, mode: int) -> None:
    """Create the file with its mode from the start (never readable by others, even briefly)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise CommandError(f"{path} exists: refusing to replace a checkpoint key") from None
    with os.fdopen(fd, "wb") as out:
        out.write(data)


class Command(BaseCommand):
    help = (
        "Write a new Ed25519 key pair for audit checkpoints: the private key (mode 600, for the sweeper's user "
        "only: GATEHOUSE_CHECKPOINT_KEY_FILE) and the public key (GATEHOUSE_CHECKPOINT_PUBLIC_KEY_FILE)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--private", required=True, help="where the private key goes (must not exist)")
        parser.add_argument("--public", required=True, help="where the public key goes (must not exist)")

    def handle(self, *args: Any, **options: Any) -> None:
        private, public = new_key_pair()
        private_path, public_path = Path(options["private"]), Path(options["public"])
        if public_path.exists():
            raise CommandError(f"{public_path} exists: refusing to replace a checkpoint key")
        write_new(private_path, private, 0o600)
        write_new(public_path, public, 0o644)
        self.stdout.write(f"private key: {private_path} (mode 600; only the sweeper's user may read it)")
        self.stdout.write(f"public key:  {public_path}")
