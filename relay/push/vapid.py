"""The server's VAPID key (RFC 8292): it signs every push, and browsers subscribe with its public half.

From `GATEHOUSE_VAPID_PRIVATE_KEY` (or `_FILE`): a PEM, or the raw 32-byte key in
base64url as `vapid --gen` prints it. Unset, one is made on first use and kept in
`GATEHOUSE_VAR_DIR/vapid-private.pem` (mode 600), so every process on the machine signs
with the same key. A new key invalidates every subscription: browsers subscribed with
the old public key, and push services refuse pushes signed by another.
"""

from __future__ import annotations

import base64
import os
import threading
from functools import cache
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from py_vapid import Vapid

_lock = threading.Lock()


def key_file() -> Path:
    return Path(settings.VAR_DIR) / "vapid-private.pem"


@cache
def vapid() -> Vapid:
    """The process's VAPID signer."""
    configured = settings.GATEHOUSE_VAPID_PRIVATE_KEY.strip()
    if configured:
        try:
            if configured.startswith("-----BEGIN"):
                return Vapid.from_pem(configured.encode())
            return Vapid.from_string(private_key=configured)
        except Exception as exc:  # py_vapid raises bare exceptions for a bad key
            raise ImproperlyConfigured(f"GATEHOUSE_VAPID_PRIVATE_KEY is not a P-256 private key: {exc}") from None
    with _lock:
        return Vapid.from_pem(_stored_key())


def _stored_key() -> bytes:
    path = key_file()
    if not path.exists():
        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # O_EXCL: when two processes start at once, one writes and both read its key.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as out:
                out.write(pem)
    return path.read_bytes()


def public_key() -> str:
    """The application server key browsers pass to `pushManager.subscribe` (base64url, no padding)."""
    raw = vapid().public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def subject() -> str:
    """The `sub` claim: how a push service reaches the operator (mailto: or https:)."""
    if settings.GATEHOUSE_VAPID_SUBJECT:
        return str(settings.GATEHOUSE_VAPID_SUBJECT)
    host = settings.PUBLIC_URL.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0] or "localhost"
    return f"mailto:admin@{host}"
