"""Loaded with `-p` (pyproject.toml) before pytest-django reads the settings.

Each test process gets its own Redis key prefix, so runs side by side on one machine,
the workers of one parallel run (pytest-xdist), and the live servers each starts (which
inherit the environment) never share state. A worker inherits the environment of the
process that started it, so the worker's id is added to whatever prefix it inherited.
"""

import os

_prefix = os.environ.setdefault("GATEHOUSE_REDIS_PREFIX", f"gh-test-{os.getpid()}")
_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker and not _prefix.endswith(f"-{_worker}"):
    os.environ["GATEHOUSE_REDIS_PREFIX"] = f"{_prefix}-{_worker}"
