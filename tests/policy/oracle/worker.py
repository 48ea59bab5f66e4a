"""One batch inside its own mount namespace (``unshare --mount … worker MODE SETTING CALL…``).

Prints ``{"cases": [...]}``: each case with the facts Gatehouse's hook would report on
this layout and Claude Code's outcome. Run by ``tests.policy.oracle.record``, never alone.
"""

from __future__ import annotations

import json
import sys

from tests.policy.oracle.cases import CALLS, PROJECT, SETTINGS, case_id
from tests.policy.oracle.claude import build_layout, call_facts, enter_sandbox, run_batch


def main(argv: list[str]) -> int:
    mode, setting_name, *wanted = argv
    setting = next(s for s in SETTINGS if s.name == setting_name)
    calls = [c for c in CALLS if c.id in set(wanted)]
    enter_sandbox()
    build_layout()
    gathered = {c.id: call_facts(c, setting) for c in calls}
    outcomes = run_batch(mode, setting, calls)
    cases = [
        {
            "id": case_id(mode, setting, c),
            "mode": mode,
            "setting": setting.name,
            "tool_name": c.tool,
            "tool_input": c.input,
            "cwd": PROJECT,
            "facts": gathered[c.id],
            "claude": outcomes[c.id],
        }
        for c in calls
    ]
    json.dump({"cases": cases}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
