"""The claim store: one holder at a time, in Redis and in process, and safe when Redis fails."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from relay.claims import LocalClaimStore, NullClaim, RedisClaimStore
from tests.relay.redis_server import PrivateRedis, private_redis


@pytest.fixture(scope="module")
def redis_server() -> Iterator[PrivateRedis]:
    with private_redis() as server:
        yield server


def _store(kind: str, server: PrivateRedis, ttl_ms: int = 5_000) -> Any:
    if kind == "redis":
        return RedisClaimStore(server.url, prefix=f"claims-test-{uuid.uuid4().hex[:6]}", ttl_ms=ttl_ms)
    return LocalClaimStore(ttl_ms=ttl_ms)


def _wait_until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def _claim_once_free(store: Any, request_id: str, holder: str) -> Any:
    """The claim, taken as soon as the one before it has expired."""
    taken: list[Any] = []

    def claims() -> bool:
        taken.append(store.claim(request_id, holder))
        return taken[-1] is not None

    _wait_until(claims)
    return taken[-1]


@pytest.mark.parametrize("kind", ["redis", "local"])
class ClaimStoreTests:
    def test_it_grants_one_claim_at_a_time(self, kind: str, redis_server: PrivateRedis) -> None:
        store = _store(kind, redis_server)
        first = store.claim("r1", "alice via web")
        assert first is not None and first.token
        assert store.claim("r1", "bob via telegram") is None
        assert store.claim("r2", "bob via telegram") is not None

    def test_it_tells_losers_who_holds_the_claim(self, kind: str, redis_server: PrivateRedis) -> None:
        store = _store(kind, redis_server)
        store.claim("r1", "alice via web")
        assert store.holder("r1") == "alice via web"
        assert store.holder("nobody") is None

    def test_it_frees_the_claim_on_release(self, kind: str, redis_server: PrivateRedis) -> None:
        store = _store(kind, redis_server)
        claim = store.claim("r1", "alice via web")
        claim.release()
        assert store.holder("r1") is None
        assert store.claim("r1", "bob via slack") is not None

    def test_it_expires_claims_after_their_ttl(self, kind: str, redis_server: PrivateRedis) -> None:
        store = _store(kind, redis_server, ttl_ms=100)
        store.claim("r1", "alice via web")
        _wait_until(lambda: store.claim("r1", "bob via slack") is not None)

    def test_it_never_releases_someone_elses_claim(self, kind: str, redis_server: PrivateRedis) -> None:
        store = _store(kind, redis_server, ttl_ms=100)
        late = store.claim("r1", "alice via web")
        bobs = _claim_once_free(store, "r1", "bob via slack")
        late.release()  # alice's claim expired long ago; bob's must survive
        assert store.holder("r1") == "bob via slack"
        assert late.extend(5_000) is False
        assert bobs.extend(5_000) is True

    def test_it_grants_exactly_one_of_many_concurrent_claims(self, kind: str, redis_server: PrivateRedis) -> None:
        store = _store(kind, redis_server)
        barrier = threading.Barrier(16)
        won: list[str] = []

        def contender(index: int) -> None:
            barrier.wait()
            if store.claim("contested", f"surface {index}") is not None:
                won.append(f"surface {index}")

        threads = [threading.Thread(target=contender, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert len(won) == 1
        assert store.holder("contested") == won[0]

    def test_a_racer_turned_away_is_woken_as_the_holder_lets_go(self, kind: str, redis_server: PrivateRedis) -> None:
        store = _store(kind, redis_server)
        claim = store.claim("r1", "alice via web")
        woken: list[bool] = []
        waiting = threading.Thread(target=lambda: woken.append(store.wait_released("r1", 30.0)))
        waiting.start()
        waiting.join(0.2)
        assert waiting.is_alive() and not woken  # still held: still waiting
        claim.release()
        waiting.join(10)
        assert woken == [True]
        # Released before the wait began: at once, however long the timeout.
        assert store.wait_released("r1", 30.0) is True

    def test_a_wait_on_a_claim_held_on_ends_false_at_its_timeout(self, kind: str, redis_server: PrivateRedis) -> None:
        store = _store(kind, redis_server)
        store.claim("r1", "alice via web")
        started = time.monotonic()
        assert store.wait_released("r1", 0.2) is False
        assert time.monotonic() - started >= 0.2
        assert store.holder("r1") == "alice via web"

    def test_a_late_release_of_an_expired_claim_wakes_nobody_waiting_on_the_new_holder(
        self, kind: str, redis_server: PrivateRedis
    ) -> None:
        store = _store(kind, redis_server, ttl_ms=100)
        late = store.claim("r1", "alice via web")
        bobs = _claim_once_free(store, "r1", "bob via slack")
        # Bob holds on for the rest of the test: a 100 ms claim could lapse on a busy
        # machine before his release, which would then (rightly) wake nobody.
        assert bobs.extend(30_000)
        late.release()  # not alice's any more: bob still holds it
        assert store.wait_released("r1", 0.05) is False
        bobs.release()
        assert store.wait_released("r1", 5.0) is True


class RedisFaultTests:
    def test_it_falls_back_to_the_database_fence_when_redis_is_down(self) -> None:
        from tests.live import free_port

        store = RedisClaimStore(f"redis://127.0.0.1:{free_port()}/0", prefix="down", ttl_ms=1000, socket_timeout=0.2)
        claim = store.claim("r1", "alice via web")
        assert isinstance(claim, NullClaim)  # not None: "nobody else holds it", so go to the fence
        claim.release()
        assert store.holder("r1") is None
        assert store.wait_released("r1", 30.0) is True  # at once: go and read the row

    def test_it_forgets_claims_when_redis_restarts(self, redis_server: PrivateRedis) -> None:
        store = RedisClaimStore(redis_server.url, prefix="restart", ttl_ms=60_000)
        assert store.claim("r1", "alice via web") is not None
        redis_server.restart()
        # The restarted Redis lost the key; the new claim succeeds, which is why the
        # database fence, not the claim, is what guarantees one decision.
        assert store.claim("r1", "bob via slack") is not None
        assert store.holder("r1") == "bob via slack"


@pytest.fixture
def claim_store_down() -> Iterator[RedisClaimStore]:
    """Point the services at a Redis that is not there (the registry's public seam)."""
    from approvals.extensions import registry
    from tests.live import free_port

    saved = registry.claim_store
    store = RedisClaimStore(f"redis://127.0.0.1:{free_port()}/0", prefix="down", ttl_ms=1000, socket_timeout=0.2)
    registry.claim_store = store
    yield store
    registry.claim_store = saved


@pytest.mark.django_db(transaction=True)
class ClaimStoreDownTests:
    def test_answers_still_decide_exactly_once_through_the_fence(
        self, claim_store_down: RedisClaimStore, ci_bot: Any, alice: Any
    ) -> None:
        from django.db import connection

        from approvals import services
        from approvals.models import Decision
        from relay import race

        request = services.request_submit(
            agent=ci_bot.agent, call={"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}}
        ).request
        barrier = threading.Barrier(6)
        won: list[bool] = []

        def decider() -> None:
            barrier.wait()
            try:
                won.append(race.answer(request.pk, services.Answer(behavior="allow", surface="api", user=alice)).won)
            finally:
                connection.close()

        threads = [threading.Thread(target=decider) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(won) == [False] * 5 + [True]
        assert Decision.objects.filter(request=request).count() == 1
