"""A fake Web Push service on 127.0.0.1 that checks what a real one checks, and reads the payload.

It plays both ends a server never sees: the push service (FCM, Mozilla's autopush) and
the browser behind it. `subscribe()` makes a browser's key pair and auth secret and
returns the PushSubscription JSON a browser would send. A push to `/push/{id}` must
carry `Content-Encoding: aes128gcm`, a `TTL`, and `Authorization: vapid t=JWT, k=KEY`
whose ES256 JWT verifies with KEY and names this service's origin as `aud`, a future
`exp` at most 24 hours ahead and a `sub` (RFC 8292); otherwise 401/400 as the real ones
answer. The body is decrypted as the browser would (RFC 8291) and kept as JSON.
A test can make a subscription answer 404 or 410 (gone), 429 or 500.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Browser:
    """The browser end of one subscription: its ECDH key and auth secret."""

    sub_id: str
    private_key: ec.EllipticCurvePrivateKey
    auth: bytes

    @property
    def p256dh(self) -> str:
        raw = self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return b64url(raw)


@dataclass
class Delivered:
    sub_id: str
    payload: dict[str, Any]
    headers: dict[str, str]
    claims: dict[str, Any]
    vapid_key: str


@dataclass
class FakePushService:
    browsers: dict[str, Browser] = field(default_factory=dict)
    delivered: list[Delivered] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # why each refused push was refused
    answer_with: dict[str, int] = field(default_factory=dict)  # sub id -> HTTP status to answer
    cond: threading.Condition = field(default_factory=threading.Condition)
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    def subscribe(self) -> dict[str, Any]:
        """A new browser subscription, as `PushSubscription.toJSON()` gives it."""
        sub_id = b64url(os.urandom(12))
        browser = Browser(sub_id, ec.generate_private_key(ec.SECP256R1()), os.urandom(16))
        self.browsers[sub_id] = browser
        return {
            "endpoint": f"{self.url}/push/{sub_id}",
            "expirationTime": None,
            "keys": {"p256dh": browser.p256dh, "auth": b64url(browser.auth)},
        }

    def for_sub(self, subscription: dict[str, Any]) -> list[Delivered]:
        sub_id = subscription["endpoint"].rsplit("/", 1)[1]
        with self.cond:
            return [d for d in self.delivered if d.sub_id == sub_id]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"fake push service: condition not met within {timeout}s")
                self.cond.wait(min(remaining, 0.2))

    # --- the push service's checks ----------------------------------------------------------

    def receive(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str]:
        sub_id = path.rsplit("/", 1)[-1]
        browser = self.browsers.get(sub_id) if path.startswith("/push/") else None
        if browser is None:
            return 404, "no such subscription"
        if sub_id in self.answer_with:
            return self.answer_with[sub_id], "as the test asked"
        problem = self._check_headers(headers)
        if problem:
            return self._refuse(400, problem)
        try:
            claims, key = self._check_vapid(headers.get("authorization", ""))
        except ValueError as exc:
            return self._refuse(401, str(exc))
        try:
            plain = http_ece.decrypt(
                body, private_key=browser.private_key, auth_secret=browser.auth, version="aes128gcm"
            )
            payload = json.loads(plain)
        except Exception as exc:  # the browser would drop a push it cannot decrypt
            return self._refuse(400, f"cannot decrypt: {exc!r}")
        with self.cond:
            self.delivered.append(Delivered(sub_id, payload, headers, claims, key))
            self.cond.notify_all()
        return 201, ""

    def _refuse(self, status: int, why: str) -> tuple[int, str]:
        with self.cond:
            self.refused.append(why)
            self.cond.notify_all()
        return status, why

    @staticmethod
    def _check_headers(headers: dict[str, str]) -> str:
        if headers.get("content-encoding") != "aes128gcm":
            return f"Content-Encoding must be aes128gcm, not {headers.get('content-encoding')!r}"
        if not headers.get("ttl", "").isdigit():
            return "TTL header missing"
        return ""

    def _check_vapid(self, authorization: str) -> tuple[dict[str, Any], str]:
        if not authorization.lower().startswith("vapid "):
            raise ValueError("Authorization must be 'vapid t=…, k=…'")
        params = dict(part.strip().split("=", 1) for part in authorization[6:].split(","))
        token, key = params.get("t", ""), params.get("k", "")
        public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(key))
        header_b64, claims_b64, signature_b64 = token.split(".")
        header = json.loads(unb64url(header_b64))
        if header.get("alg") != "ES256":
            raise ValueError(f"JWT alg must be ES256, not {header.get('alg')!r}")
        signature = unb64url(signature_b64)
        if len(signature) != 64:
            raise ValueError("ES256 signature must be 64 bytes")
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        try:
            public.verify(der, f"{header_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise ValueError("VAPID JWT signature does not verify with k") from None
        claims = json.loads(unb64url(claims_b64))
        if claims.get("aud") != self.url:
            raise ValueError(f"aud must be {self.url}, not {claims.get('aud')!r}")
        if not time.time() < float(claims.get("exp", 0)) <= time.time() + 24 * 3600:
            raise ValueError("exp must be in the future and at most 24 hours ahead")
        if not str(claims.get("sub", "")).startswith(("mailto:", "https:")):
            raise ValueError("sub must be a mailto: or https: URL")
        return claims, key

    # --- the HTTP side -----------------------------------------------------------------------

    def start(self) -> FakePushService:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, text = fake.receive(self.path, headers, body)
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@contextmanager
def fake_push_service() -> Iterator[FakePushService]:
    fake = FakePushService().start()
    try:
        yield fake
    finally:
        fake.stop()
