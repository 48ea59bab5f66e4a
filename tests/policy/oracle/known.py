"""The recorded cases where Gatehouse and Claude Code answer differently, on purpose or not yet.

Both lists live in ``known-<version>.json`` beside the recording:

- ``deliberate``: case id -> the deviation's name, each explained in docs/POLICY.md
  ("Where Gatehouse is stricter than Claude Code"). Only ever stricter: a test fails on a
  deviation where Gatehouse is looser.
- ``expected_to_fix``: case id -> topic, gaps being fixed in the engine. The test reports
  how many remain, and fails on one that agrees now (remove it when it does).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.policy.oracle.compare import CLAUDE_CODE_VERSION

KNOWN = Path(__file__).resolve().parent / f"known-{CLAUDE_CODE_VERSION}.json"

_known = json.loads(KNOWN.read_text())
DELIBERATE: dict[str, str] = _known["deliberate"]
EXPECTED_TO_FIX: dict[str, str] = _known["expected_to_fix"]
