"""The channel-layer events, one typed shape per event type.

Events are doorbells between processes (`approvals/events.py`, the relay's consumers):
small, and never the truth. Their shapes are checked in the tests
(`tests/relay/test_event_schema.py`) against events caught on the real channel layer,
so a producer and its consumers cannot drift apart unnoticed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

__all__ = ["EVENT_TYPES", "EventShapeError", "check_event"]


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestCreated(_Event):
    type: Literal["request.created"]
    request_id: str


class RequestFinished(_Event):
    """`decision` rides along unless its rewritten input is too large (then it is read).

    - `at_submit`: decided in the transaction that created it (never pending), so only
      the teams' dashboards hear it; present only when true.
    """

    type: Literal["request.decided", "request.cancelled", "request.expired"]
    request_id: str
    decision_id: int
    state: Literal["decided", "cancelled", "expired"]
    behavior: Literal["allow", "deny"]
    decided_by: str
    surface: str
    at_submit: Literal[True] | None = None
    decision: dict[str, Any] | None = None


class RequestUpdated(_Event):
    """A step on the way to a decision, with its audit row: a quorum vote, a ladder step.

    - An `autopilot` row (a promotion, after the decision) is never announced this way.
    """

    type: Literal["request.updated"]
    request_id: str
    decision_id: int
    kind: Literal["vote", "reminder", "escalation"]


class RequestReviewed(_Event):
    type: Literal["request.claimed", "request.released"]
    request_id: str
    by: str
    sender: str


class RequestProgress(_Event):
    type: Literal["request.progress"]
    request_id: str
    data: Any


class SessionEnded(_Event):
    type: Literal["session.ended"]


class RequestAbandoned(_Event):
    """A long-poll waiter wakes its own stuck receive (`approvals/waiting.py`)."""

    type: Literal["request.abandoned"]


_SHAPES: dict[str, TypeAdapter[Any]] = {}
for _model in (
    RequestCreated,
    RequestFinished,
    RequestUpdated,
    RequestReviewed,
    RequestProgress,
    SessionEnded,
    RequestAbandoned,
):
    for _type in _model.model_fields["type"].annotation.__args__:  # type: ignore[union-attr]
        _SHAPES[_type] = TypeAdapter(_model)

EVENT_TYPES = frozenset(_SHAPES)


class EventShapeError(ValueError):
    """An event does not match the shape of its type."""


def check_event(event: object) -> None:
    """Raise EventShapeError unless ``event`` is a known event type in its shape."""
    if not isinstance(event, dict) or event.get("type") not in _SHAPES:
        raise EventShapeError(f"not a known event: {event!r:.300}")
    try:
        _SHAPES[event["type"]].validate_python(event)
    except ValidationError as exc:
        raise EventShapeError(f"{event['type']} event out of shape: {exc}") from None
