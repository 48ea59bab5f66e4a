"""The WebSocket frames the server sends, one typed shape per frame type.

Clients (the SDK, the dashboard's JS, anyone's script) are written against these shapes,
so they are the contract of `/ws/agent/` and `/ws/dashboard/` besides docs/API.md. The
consumers build plain dicts for speed; the tests check every frame they receive against
`check_frame`, so a frame that drifts from its shape fails the suite, not a client.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

__all__ = ["FRAME_TYPES", "FrameShapeError", "check_frame"]


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DecisionBody(_Frame):
    """What an agent hears: `approvals.selectors.decision_payload`."""

    id: int | None = None
    behavior: Literal["allow", "deny"]
    message: str
    updated_input: dict[str, Any] | None
    reason: dict[str, Any]
    decided_by: str
    surface: str
    decided_at: str | None = None


# -- to agents (/ws/agent/)


class PendingFrame(_Frame):
    type: Literal["pending"]
    ref: Any
    id: str


class DecisionFrame(_Frame):
    type: Literal["decision"]
    ref: Any
    id: str | None
    status: Literal["decided", "cancelled", "expired"]
    decision: DecisionBody


class ErrorFrame(_Frame):
    """Also sent to dashboards. `ref`/`id` name the frame or request it answers, when known."""

    type: Literal["error"]
    code: str
    message: str
    ref: Any = None
    id: str | None = None


class ReconnectFrame(_Frame):
    type: Literal["reconnect"]
    reason: str
    message: str


# -- to dashboards (/ws/dashboard/)


class CardRef(_Frame):
    id: str
    html: str


class SnapshotFrame(_Frame):
    """One part of a snapshot: the list is whole once part `parts` arrived."""

    type: Literal["snapshot"]
    requests: list[CardRef]
    part: int = Field(ge=1)
    parts: int = Field(ge=1)


class CreatedFrame(_Frame):
    """A new card, or a pending card re-rendered (`request.updated`: a quorum vote, a ladder step)."""

    type: Literal["request.created", "request.updated"]
    id: str
    html: str


class FinishedFrame(_Frame):
    type: Literal["request.decided", "request.cancelled", "request.expired"]
    id: str
    html: str
    behavior: Literal["allow", "deny"] | None
    decided_by: str | None
    surface: str | None


class BatchFrame(_Frame):
    """Cards of calls decided at submit (never pending), gathered per tick.

    - Each item is the `request.decided` frame as it would have come alone; in the order
      the calls were decided.
    """

    type: Literal["batch"]
    frames: list[FinishedFrame] = Field(min_length=1)


class ReviewFrame(_Frame):
    type: Literal["request.claimed", "request.released"]
    id: str | None
    by: str | None


class ProgressFrame(_Frame):
    type: Literal["request.progress"]
    id: str | None
    data: Any


_SHAPES: dict[str, TypeAdapter[Any]] = {}
for _model in (
    PendingFrame,
    DecisionFrame,
    ErrorFrame,
    ReconnectFrame,
    SnapshotFrame,
    CreatedFrame,
    FinishedFrame,
    BatchFrame,
    ReviewFrame,
    ProgressFrame,
):
    for _type in _model.model_fields["type"].annotation.__args__:  # type: ignore[union-attr]
        _SHAPES[_type] = TypeAdapter(_model)

FRAME_TYPES = frozenset(_SHAPES)


class FrameShapeError(ValueError):
    """A frame the server sent does not match the shape of its type."""


def check_frame(frame: object) -> None:
    """Raise FrameShapeError unless ``frame`` is a server frame of a known type and shape."""
    if not isinstance(frame, dict) or frame.get("type") not in _SHAPES:
        raise FrameShapeError(f"not a known server frame: {frame!r:.300}")
    try:
        _SHAPES[frame["type"]].validate_python(frame)
    except ValidationError as exc:
        raise FrameShapeError(f"{frame['type']} frame out of shape: {exc}") from None
