"""The race: an ask is announced on every surface at once, and the first answer wins.

People's surfaces (dashboards through the channel layer, chat bridges through their own
announcers) are told by `approvals.events`. This module adds the automated racers —
PermissionRequest webhooks and the LLM classifier — and the one door every surface
answers through, `answer()`, so claim → fence → audit → announce happens in one place.

Coordinator context takes the queue instead of the race (Claude Code's coordinator
handler): the automated surfaces are asked one after another, hooks first, then the
classifier; people can answer at any time (see docs/RELAY.md).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from django.db import close_old_connections, connection

from approvals import services
from approvals.models import Context, Decision, PermissionRequest, RequestState
from approvals.quorum import Requirement
from approvals.services import Answer, DecideResult

log = logging.getLogger(__name__)


def answer(request_id: uuid.UUID | str, answer: Answer) -> DecideResult:
    """Answer a pending request from any surface; `won` tells whether this answer counted.

    - Raises `services.ServiceError` when the answer may not count (a quorum's rules, a
      grant no rule can say) and `services.AuditUnavailable` when the decision could not
      be recorded; a bad behavior or remember value never gets this far (`Answer`).
    - A loser's result carries the winner's decision (or the claim holder while the
      winner is still committing); `loser_message(result)` says it in words.
    """
    result = services.request_decide(request_id, answer)
    if not result.won and not result.holder:
        # Lost at the fence rather than at the claim (the claim store counts those).
        from relay import observability

        observability.record_claim_conflict()
    return result


def loser_message(result: DecideResult) -> str:
    """'already decided by X via Y', for whichever surface arrived second."""
    if result.request is None:
        return "no longer pending"
    return result.request.outcome_sentence(result.decision, holder=result.holder, late=True)


# --- automated racers -----------------------------------------------------------------------


class Racer(Protocol):
    """An automated surface that may answer an ask (a webhook, a classifier)."""

    name: str

    def may_answer(self, request: PermissionRequest) -> bool:
        """False when the surface knows, without a read, that it has nothing to ask about
        this request: then the race starts no job for it. Runs in the committing thread;
        never raises, never reads the database."""
        ...

    def offers(self, request: PermissionRequest, still_pending: Callable[[], bool]) -> list[Answer]:
        """Ask the surface; return its answers (empty when it abstains). Never raises.

        - `still_pending`: one read of the request's state. Call it once the surface has
          something to ask, before asking (a network call): a finished request is not
          offered to anyone, and a surface with nothing to ask reads nothing more.
        """
        ...


def submit_offer(request: PermissionRequest, offer: Answer) -> DecideResult | None:
    """An automated surface's answer (a webhook's, a classifier's) to one request."""
    if offer.behavior == "allow" and Requirement.of(request) is not None:
        # Only people complete a quorum (request_decide refuses it too); a deny still counts.
        log.info("%s offered to allow %s, which needs people's approvals; ignored", offer.by, request.pk)
        return None
    try:
        return answer(request.pk, offer)
    except (services.ServiceError, services.AuditUnavailable):
        log.exception("%s could not answer %s", offer.by, request.pk)
        return None


class Race:
    """Registered as an announcer: on each ask, start the automated racers."""

    name = "race"
    asks_only = True  # racers only ever answer asks

    def __init__(self, racers: list[Racer] | None = None, *, workers: int = 8) -> None:
        self.racers: list[Racer] = list(racers or [])
        self._pool: ThreadPoolExecutor | None = None
        self._workers = workers

    def add(self, racer: Racer) -> None:
        if all(existing.name != racer.name for existing in self.racers):
            self.racers.append(racer)

    @property
    def pool(self) -> ThreadPoolExecutor:
        # Announcers run inside `on_commit` in the committing thread: never block it.
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="race")
        return self._pool

    def request_created(self, request: PermissionRequest) -> None:
        # Most teams have no racer with anything to ask: then no thread is woken and no
        # connection checked out for the ask (one job cost a push ~0.6 ms, docs/PERFORMANCE.md).
        racers = [racer for racer in self.racers if racer.may_answer(request)]
        if not racers:
            return
        if request.context == Context.COORDINATOR:
            self._run(self.queue, request, racers)
        else:
            for racer in racers:
                self._run(self.ask_one, request, racer)

    def request_finished(self, request: PermissionRequest, decision: Decision) -> None:
        return None

    def _run(self, func: Callable[..., Any], *args: Any) -> None:
        def job() -> None:
            try:
                func(*args)
            except Exception:  # a failed racer has no opinion; people and the deadline still decide
                log.exception("racer failed for %s", args[0].pk)
            finally:
                # Worker threads outlive the job; give the connection back.
                connection.close()

        self.pool.submit(job)

    def ask_one(self, request: PermissionRequest, racer: Racer) -> bool:
        """Ask one racer; True when the request is known finished afterwards (by anyone)."""
        close_old_connections()
        finished = False

        def still_pending() -> bool:
            nonlocal finished
            finished = not PermissionRequest.objects.filter(pk=request.pk, state=RequestState.PENDING).exists()
            return not finished

        for offer in racer.offers(request, still_pending):
            result = submit_offer(request, offer)
            if result is not None:
                return True
        return finished

    def queue(self, request: PermissionRequest, racers: list[Racer] | None = None) -> None:
        """Coordinator context: hooks, then classifier, one after another; people last.

        - `racers`: those that may answer (all of the race's when None).
        """
        chosen = self.racers if racers is None else racers
        for racer in sorted(chosen, key=lambda r: 0 if r.name.startswith("webhook") else 1):
            if self.ask_one(request, racer):
                return


race = Race()
