"""The seams where the relay plugs into the approvals services.

`approvals` must not import `relay` (SPEC §1), yet a decision needs the relay's claim
store and every ask must reach the relay's surfaces. The relay registers its pieces
here once, in `RelayConfig.ready()`; the services call them through these protocols.
Without a relay (unit tests of the services alone) the defaults are safe: no claim
store means the database fence alone decides, no announcers means nobody is told.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from approvals.models import Decision, PermissionRequest
    from approvals.written import Statement


class Claim(Protocol):
    token: str

    def release(self) -> None: ...


class ClaimStore(Protocol):
    """The fast path of the race: at most one holder per request at a time."""

    def claim(self, request_id: str, holder: str) -> Claim | None: ...

    def holder(self, request_id: str) -> str | None: ...

    def wait_released(self, request_id: str, timeout: float) -> bool:
        """Block until the claim's holder lets go (True), or `timeout` seconds pass (False)."""
        ...


class Announcer(Protocol):
    """A surface told about requests after their state committed (never before).

    - An announcer with a true `asks_only` attribute hears `request_finished` only for
      requests that were asks: a call the engine decided at submit was never shown to
      anyone, so such a surface has nothing to take back (no chat card, no push).
    """

    name: str

    def request_created(self, request: PermissionRequest) -> None: ...

    def request_finished(self, request: PermissionRequest, decision: Decision) -> None: ...


class CardRead(Protocol):
    """An ask's card for this process's dashboards, read in the ask's own message."""

    # To send after the ask's insert, in the same `run_together` (its own message).
    statements: list[Statement]

    def committed(self, rows: Sequence[list[tuple[Any, ...]]]) -> Callable[[], None] | None:
        """Call in the committing thread before ringing `request.created`, with the rows
        `statements` returned: the render for the sockets to take (run it after the
        doorbell; it never raises); None when they can no longer take it."""
        ...


class CardReader(Protocol):
    """The cards of this process's dashboards, read where a request is committed.

    An ask's card is read by every process with a dashboard of its team open. The process
    that commits the ask reads it in the ask's own message and renders it in the
    committing thread, right after its doorbell, instead of on a worker thread once the
    doorbell has reached its sockets.
    """

    def read_here(self, request_id: uuid.UUID, team_id: int) -> CardRead | None:
        """Call in the thread about to insert an ask: when a socket of this process shows
        the team's cards, the read of its card to send with the insert; None when no such
        socket is open here."""
        ...


# The slow part of a provider (network calls), returning the keys it contributes to the
# engine's input, e.g. `{"pre_tool_use_hooks": [...]}` or `{"classifier_verdict": {...}}`.
PreDecisionWork = Callable[[], dict[str, Any]]


class PreDecisionProvider(Protocol):
    """Runs before the engine (SPEC §4 step 3): PreToolUse webhooks, classifiers.

    - Called on the request's own thread: read the database here, never later.
    - Returns None when it has nothing to add to this call, else its `PreDecisionWork`,
      which may run on a worker thread in parallel with the other providers' and must
      not touch the database (a request holds one pooled connection, never two).
    - `rules_version`: the team's rules version as this call read it. It changes in the
      commit of any change to the team's rules or webhooks (`RulesVersion`), so what a
      provider read of those may be kept until it does.
    """

    def __call__(self, call: dict[str, Any], *, team_id: int, rules_version: str) -> PreDecisionWork | None: ...


@dataclass
class Registry:
    claim_store: ClaimStore | None = None
    announcers: list[Announcer] = field(default_factory=list)
    pre_decision: list[PreDecisionProvider] = field(default_factory=list)
    cards: CardReader | None = None

    def add_announcer(self, announcer: Announcer) -> None:
        if all(existing.name != announcer.name for existing in self.announcers):
            self.announcers.append(announcer)


registry = Registry()
