"""The claim store: the fast path of the race, at most one holder per request at a time.

The claim is only an optimisation. Behind it, `services.request_decide` moves the row
with a conditional update (`WHERE state = 'pending'`, version bump), and that update is
the fence: if Redis restarts, is flushed, fails over, or pauses past the TTL so that two
surfaces both "hold" a claim, only one of them can still move the row. So every fault
here degrades to "the database decides", never to "two decisions".
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from redis.exceptions import RedisError

from approvals.extensions import Claim, ClaimStore

log = logging.getLogger(__name__)

# Value stored under the key: "<token> <holder>". The token makes release and extend
# safe (only the owner can), the holder lets losers say who is deciding.
_SEPARATOR = " "

# KEYS[1] = claim key, KEYS[2] = its release stream, ARGV[1] = the full value we set,
# ARGV[2] = how long the stream is kept (ms). Delete only our own claim: a claim that
# expired and was re-taken by someone else must survive our late release. The stream's
# one entry wakes the racers blocked on it (`wait_released`), those that block later too.
_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    redis.call('XADD', KEYS[2], 'MAXLEN', '1', '*', 'released', '1')
    redis.call('PEXPIRE', KEYS[2], ARGV[2])
    return 1
end
return 0
"""

# KEYS[1] = claim key, ARGV[1] = our value, ARGV[2] = new TTL in ms.
_EXTEND_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


def _count_conflict() -> None:
    # Imported late: observability pulls in prometheus and OpenTelemetry, which the
    # store itself does not need (and unit tests of the store may run without them).
    from relay import observability

    observability.record_claim_conflict()


@dataclass
class NullClaim:
    """What `claim()` returns when the store is down: no claim, the database fence decides."""

    token: str = ""

    def release(self) -> None:
        return None

    def extend(self, ttl_ms: int | None = None) -> bool:
        return False


# --- Redis ------------------------------------------------------------------------------


@dataclass
class RedisClaim:
    store: RedisClaimStore
    key: str
    value: str
    token: str
    released: bool = False

    def release(self) -> None:
        # Released as the decision commits and again on the way out: once is enough.
        if self.released:
            return
        self.released = True
        try:
            self.store.release_script(keys=[self.key, f"{self.key}:released"], args=[self.value, self.store.ttl_ms])
        except RedisError:  # the claim expires by itself; the fence already decided
            log.warning("could not release claim %s", self.key, exc_info=True)

    def extend(self, ttl_ms: int | None = None) -> bool:
        """Keep holding the claim while a slow decision (a rule save) completes."""
        ttl = ttl_ms or self.store.ttl_ms
        try:
            return bool(self.store.extend_script(keys=[self.key], args=[self.value, ttl]))
        except RedisError:
            log.warning("could not extend claim %s", self.key, exc_info=True)
            return False


class RedisClaimStore:
    """`SET key token NX PX ttl`; Lua compare-and-delete and compare-and-extend.

    A release also adds an entry to the claim's release stream (`{key}:released`, kept for
    the TTL), which the racers turned away wait on with a blocking `XREAD`: each is woken
    as the holder lets go, in any process, without polling.
    """

    def __init__(self, url: str, *, prefix: str, ttl_ms: int, socket_timeout: float = 1.0) -> None:
        import redis

        # A short socket timeout: a hung Redis must not hold up a decision for long,
        # since the fallback (the database fence) is always correct.
        self.client: Any = redis.Redis.from_url(
            url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout, decode_responses=True
        )
        self.prefix = prefix
        self.ttl_ms = ttl_ms
        # A blocking read lasts at most this long, well inside the socket's timeout.
        self.block_ms = max(1, int(socket_timeout * 500))
        self.release_script = self.client.register_script(_RELEASE_LUA)
        self.extend_script = self.client.register_script(_EXTEND_LUA)

    def key(self, request_id: str) -> str:
        return f"{self.prefix}:claim:{request_id}"

    def claim(self, request_id: str, holder: str) -> Claim | None:
        token = secrets.token_hex(16)
        key = self.key(request_id)
        value = f"{token}{_SEPARATOR}{holder}"
        try:
            taken = self.client.set(key, value, nx=True, px=self.ttl_ms)
        except RedisError:
            log.error("claim store unavailable for %s; falling back to the database fence", request_id, exc_info=True)
            return NullClaim()
        if not taken:
            _count_conflict()
            return None
        return RedisClaim(self, key, value, token)

    def holder(self, request_id: str) -> str | None:
        try:
            value = self.client.get(self.key(request_id))
        except Exception:
            log.warning("claim store unavailable reading holder of %s", request_id, exc_info=True)
            return None
        if not value:
            return None
        return str(value).partition(_SEPARATOR)[2] or None

    def wait_released(self, request_id: str, timeout: float) -> bool:
        """Block until the claim's holder lets go; False if it has not within `timeout` s.

        - True at once for a claim released before the call (its stream entry is kept).
        - A claim that expires unreleased (its holder died) wakes nobody: the racer waits
          out `timeout` and reads the row, as the fence decides anyway.
        - True when Redis fails: the caller reads the row, which is the truth.
        """
        deadline = time.monotonic() + timeout
        stream = f"{self.key(request_id)}:released"
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                if self.client.xread({stream: "0"}, count=1, block=max(1, min(self.block_ms, int(remaining * 1000)))):
                    return True
            except RedisError:
                log.warning("claim store unavailable waiting for %s's holder", request_id, exc_info=True)
                return True
        return False


# --- embedded (single process) ------------------------------------------------------------


@dataclass
class _Entry:
    token: str
    holder: str
    expires_at: float


@dataclass
class LocalClaim:
    store: LocalClaimStore
    request_id: str
    token: str
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.store.release(self.request_id, self.token)

    def extend(self, ttl_ms: int | None = None) -> bool:
        return self.store.extend(self.request_id, self.token, ttl_ms or self.store.ttl_ms)


@dataclass
class LocalClaimStore:
    """An in-process claim store for `make run` without Redis (one server process only)."""

    ttl_ms: int
    _entries: dict[str, _Entry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _released: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self._released = threading.Condition(self._lock)

    def _live(self, request_id: str, now: float) -> _Entry | None:
        entry = self._entries.get(request_id)
        if entry is not None and entry.expires_at <= now:
            del self._entries[request_id]
            return None
        return entry

    def claim(self, request_id: str, holder: str) -> Claim | None:
        now = time.monotonic()
        with self._lock:
            if self._live(request_id, now) is not None:
                conflict = True
            else:
                conflict = False
                token = secrets.token_hex(16)
                self._entries[request_id] = _Entry(token, holder, now + self.ttl_ms / 1000)
        if conflict:
            _count_conflict()
            return None
        return LocalClaim(self, request_id, token)

    def holder(self, request_id: str) -> str | None:
        with self._lock:
            entry = self._live(request_id, time.monotonic())
            return entry.holder if entry is not None else None

    def wait_released(self, request_id: str, timeout: float) -> bool:
        """Block until nobody holds the claim (released, or expired); False if still held after `timeout` s."""
        deadline = time.monotonic() + timeout
        with self._released:
            while (entry := self._live(request_id, now := time.monotonic())) is not None:
                if now >= deadline:
                    return False
                self._released.wait(min(deadline, entry.expires_at) - now)
            return True

    def release(self, request_id: str, token: str) -> None:
        with self._lock:
            entry = self._entries.get(request_id)
            if entry is not None and entry.token == token:
                del self._entries[request_id]
                self._released.notify_all()

    def extend(self, request_id: str, token: str, ttl_ms: int) -> bool:
        now = time.monotonic()
        with self._lock:
            entry = self._live(request_id, now)
            if entry is None or entry.token != token:
                return False
            entry.expires_at = now + ttl_ms / 1000
            return True


def build_claim_store() -> ClaimStore:
    """Redis when `REDIS_URL` is set (several processes), else the embedded store."""
    ttl_ms = settings.GATEHOUSE_CLAIM_TTL_MS
    if settings.REDIS_URL:
        return RedisClaimStore(settings.REDIS_URL, prefix=settings.GATEHOUSE_REDIS_PREFIX, ttl_ms=ttl_ms)
    log.warning("REDIS_URL is not set: in-process claim store and channel layer, single server process only")
    return LocalClaimStore(ttl_ms=ttl_ms)
