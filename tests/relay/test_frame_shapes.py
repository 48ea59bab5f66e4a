"""Every frame the server sends has one shape per type (`relay.frames`).

The socket tests check each frame they receive (`tests/relay/wsclient.receive`); these
tests make sure the check itself can fail, and that the shapes cover what the consumers
and the docs name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from relay.drain import RECONNECT_FRAME
from relay.frames import FRAME_TYPES, FrameShapeError, check_frame

ROOT = Path(__file__).resolve().parents[2]

DECISION = {
    "id": 7,
    "behavior": "deny",
    "message": "no",
    "updated_input": None,
    "reason": {"type": "user", "user": "alice", "surface": "web"},
    "decided_by": "alice",
    "surface": "web",
    "decided_at": "2026-12-01T12:00:00+00:00",
}

DECIDED = {
    "type": "request.decided",
    "id": "x",
    "html": "",
    "behavior": "allow",
    "decided_by": "rule",
    "surface": "engine",
}

GOOD: list[dict[str, Any]] = [
    {"type": "pending", "ref": "r1", "id": "8c3b0e4e-6f3a-4a8b-9a55-0d1f0e0c1a11"},
    {
        "type": "decision",
        "ref": 3,
        "id": "8c3b0e4e-6f3a-4a8b-9a55-0d1f0e0c1a11",
        "status": "decided",
        "decision": DECISION,
    },
    {"type": "error", "code": "invalid_frame", "message": "send JSON", "ref": None},
    RECONNECT_FRAME,
    {"type": "snapshot", "requests": [{"id": "x", "html": "<article></article>"}], "part": 1, "parts": 1},
    {"type": "request.created", "id": "x", "html": "<article></article>"},
    {"type": "request.expired", "id": "x", "html": "", "behavior": "deny", "decided_by": "timeout", "surface": "timer"},
    {"type": "request.claimed", "id": "x", "by": "alice"},
    {"type": "request.progress", "id": "x", "data": {"stdout": "ok"}},
    {"type": "batch", "frames": [{**DECIDED, "id": "x"}, {**DECIDED, "id": "y"}]},
]

BAD: list[Any] = [
    {"type": "pending", "ref": "r1"},  # no id
    {"type": "decision", "ref": 1, "id": None, "status": "decided", "decision": {**DECISION, "behavior": "ask"}},
    {"type": "decision", "ref": 1, "id": None, "status": "thinking", "decision": DECISION},
    {"type": "error", "code": "x"},  # no message
    {"type": "snapshot", "requests": [{"id": "x"}], "part": 1, "parts": 1},  # a card without html
    {"type": "snapshot", "requests": [], "part": 0, "parts": 1},  # parts count from 1
    {"type": "request.created", "id": "x", "html": "", "extra": 1},  # unknown field
    {"type": "request.deleted", "id": "x"},  # unknown type
    {"type": "pending", "ref": "r", "id": "x", "secret": "leak"},
    ["pending"],
    {"type": "batch", "frames": []},  # a batch has something in it
    {"type": "batch", "frames": [{"type": "request.created", "id": "x", "html": ""}]},  # decided cards only
    {"type": "batch", "frames": [{**DECIDED, "html": None}]},  # each item in its own shape
    {"type": "batch", "frames": [DECIDED], "part": 1},  # unknown field
]


class FrameShapeTests:
    @pytest.mark.parametrize("frame", GOOD, ids=lambda f: str(f.get("type")))
    def test_it_accepts_each_frame_type_in_its_shape(self, frame: dict[str, Any]) -> None:
        check_frame(frame)

    @pytest.mark.parametrize("frame", BAD, ids=str)
    def test_it_refuses_a_frame_out_of_shape(self, frame: Any) -> None:
        with pytest.raises(FrameShapeError):
            check_frame(frame)

    def test_it_has_a_shape_for_every_frame_type_the_consumers_send(self) -> None:
        source = "".join(p.read_text() for p in sorted((ROOT / "relay" / "consumers").glob("*.py")))
        source += (ROOT / "relay" / "drain.py").read_text()
        sent = set(re.findall(r'"type": "([a-z_.]+)"', source))
        # Channel-layer events the consumers forward under their own type name.
        sent |= {"request.decided", "request.cancelled", "request.released"}
        # A channel-layer event between processes, and a reason's type inside a decision.
        internal = {"session.ended", "other"}
        assert sent - internal <= FRAME_TYPES, sorted(sent - internal - FRAME_TYPES)

    def test_every_frame_type_is_documented(self) -> None:
        relay_doc = (ROOT / "docs" / "RELAY.md").read_text()
        missing = sorted(t for t in FRAME_TYPES if not re.search(rf"(?<![\w.]){re.escape(t)}(?!\w)", relay_doc))
        assert missing == [], missing
