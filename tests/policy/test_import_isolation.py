"""The engine stays pure: importing it loads no Django, Redis or HTTP library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = (
    "import json, sys, policy, policy.__main__, policy.lint, policy.settings, policy.classifier; "
    "policy.decide({'tool_name': 'Bash', 'tool_input': {'command': 'ls'}}); "
    "print(json.dumps(sorted(sys.modules)))"
)


class ImportIsolationTests:
    def test_it_loads_no_django_redis_or_http_module(self) -> None:
        result = subprocess.run(
            [sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
        )
        modules = json.loads(result.stdout)
        assert "policy.pipeline.engine" in modules  # the probe really ran the engine
        forbidden = [
            m for m in modules if m.split(".")[0] in {"django", "redis", "httpx", "requests", "channels", "urllib3"}
        ]
        assert forbidden == []
