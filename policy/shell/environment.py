"""The variables Claude Code 2.1.332 lets a ``VAR=value`` prefix set under a Bash allow rule.

Claude Code strips these before matching a rule (``NODE_ENV=test npm run test`` is
``npm run test``); any other prefix stays part of the command, so ``FOO=1 ls`` is not
allowed by ``Bash(ls *)`` — the variable may change what the command does (the list is
the CLI's own, read from 2.1.332; tests/policy/oracle records the behaviour).
"""

from __future__ import annotations

import re

SAFE_ENV_VARS = frozenset(
    {
        "GOEXPERIMENT",
        "GOOS",
        "GOARCH",
        "CGO_ENABLED",
        "GO111MODULE",
        "RUST_BACKTRACE",
        "RUST_LOG",
        "NODE_ENV",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
        "PYTEST_DEBUG",
        "ANTHROPIC_API_KEY",
        "LANG",
        "LANGUAGE",
        "LC_ALL",
        "LC_CTYPE",
        "LC_TIME",
        "CHARSET",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "FORCE_COLOR",
        "TZ",
        "LS_COLORS",
        "LSCOLORS",
        "GREP_COLOR",
        "GREP_COLORS",
        "GCC_COLORS",
        "TIME_STYLE",
        "BLOCK_SIZE",
        "BLOCKSIZE",
        "COLUMNS",
        "LINES",
        "CLICOLOR",
        "CLICOLOR_FORCE",
        "CI",
        "DEBIAN_FRONTEND",
        "GIT_TERMINAL_PROMPT",
    }
)
# A locale variable is safe only with a plain locale name (``C``, ``en_US.UTF-8``).
_LOCALE_VARS = frozenset({"LANG", "LC_ALL", "LC_CTYPE"})
_LOCALE = re.compile(r"^(['\"]?)(C|POSIX|UTF-?8|[\w-]+\.UTF-?8(@\w+)?)\1$", re.IGNORECASE)
_PLAIN_VALUE = re.compile(r"^[\w.,:@%+=/-]*$|^'[^']*'$|^\"[\w.,:@%+=/ -]*\"$")


def safe_assignment(assignment: str) -> bool:
    """True if ``NAME=value`` is one Claude Code strips before matching an allow rule."""
    name, _, value = assignment.partition("=")
    if name not in SAFE_ENV_VARS:
        return False
    if name in _LOCALE_VARS:
        return bool(_LOCALE.match(value))
    # A value that expands or substitutes is only known when the command runs.
    return bool(_PLAIN_VALUE.match(value))
