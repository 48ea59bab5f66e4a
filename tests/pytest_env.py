"""Loaded with `-p` (pyproject.toml) before pytest-django reads the settings.

Each test run gets its own Redis key prefix, so runs side by side on one machine (and
the live servers a run starts, which inherit the environment) never share state.
"""

import os

os.environ.setdefault("GATEHOUSE_REDIS_PREFIX", f"gh-test-{os.getpid()}")
