"""What the agent reported about its own machine: the engine's only view of any disk.

The engine decides calls that run on another machine, so it never reads the disk or
environment it runs on. The agent (hook, SDK client, ``python -m policy decide``)
reports, per call, its home directory, user name and, for every path the call touches,
where the path really leads and whether it exists. Every answer here may be None:
"not reported", which the pipeline treats as "must not auto-allow on this".
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_PATHS = 512  # a hook reports at most a few hundred paths per call
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux
MAX_USER_CHARS = 256
_FACT_FIELDS = frozenset({"real", "exists", "dir"})


class FactsError(ValueError):
    """The ``facts`` object is malformed; the message says which part and why."""


@dataclass(frozen=True)
class PathFact:
    """One path as the agent saw it; None means the agent did not say."""

    real: str | None = None
    exists: bool | None = None
    dir: bool | None = None


@dataclass(frozen=True)
class AgentFacts:
    """The agent's claims about its machine; ``reported`` is False when none came."""

    home: str | None = None
    user: str | None = None
    paths: Mapping[str, PathFact] = field(default_factory=dict)
    truncated: bool = False
    reported: bool = False

    def real(self, lexical: str) -> str | None:
        """Where ``lexical`` leads after symlinks, or None when the agent did not say."""
        fact, suffix = self._nearest(lexical)
        if fact is None or fact.real is None:
            return None
        return fact.real + suffix if suffix else fact.real

    def exists(self, lexical: str) -> bool | None:
        fact, suffix = self._nearest(lexical)
        if fact is None:
            return None
        return False if suffix else fact.exists

    def is_dir(self, lexical: str) -> bool | None:
        fact, suffix = self._nearest(lexical)
        if fact is None:
            return None
        return False if suffix else fact.dir

    def _nearest(self, lexical: str) -> tuple[PathFact | None, str]:
        """The fact for ``lexical``, or for an ancestor below which nothing can exist.

        Below a missing path or a file nothing exists and no symlink can intervene, so
        the ancestor's real path plus the rest is the real path.
        """
        found = self.paths.get(lexical)
        if found is not None:
            return found, ""
        prefix = lexical
        while prefix not in ("/", ""):
            prefix = posixpath.dirname(prefix)
            ancestor = self.paths.get(prefix)
            if ancestor is None:
                continue
            if ancestor.exists is False or ancestor.dir is False:
                rest = lexical[len(prefix) :] if prefix != "/" else lexical
                return ancestor, rest
            return None, ""
        return None, ""


NO_FACTS = AgentFacts()


def is_normal_absolute(path: object) -> bool:
    """An absolute path with no ``.``, ``..``, doubled or trailing slash, or NUL.

    What ``posixpath.normpath`` leaves as it is, but ``//``: checked on the string, which
    is a fraction of normpath's cost, for every path an agent reports.
    """
    if not isinstance(path, str) or not path.startswith("/") or "\x00" in path or len(path) > MAX_PATH_CHARS:
        return False
    if path == "/":
        return True
    closed = path + "/"
    return "//" not in closed and "/./" not in closed and "/../" not in closed


def parse_facts(value: object) -> AgentFacts:
    """Validate a ``facts`` object strictly; None (absent) means nothing was reported."""
    if value is None:
        return NO_FACTS
    if not isinstance(value, Mapping):
        raise FactsError("facts must be an object")
    unknown = set(value) - {"home", "user", "paths", "truncated"}
    if unknown:
        raise FactsError(f"facts has unknown keys: {', '.join(sorted(map(str, unknown)))}")
    home = value.get("home")
    if home is not None and not is_normal_absolute(home):
        raise FactsError("facts.home must be a normalised absolute path")
    user = value.get("user")
    if user is not None and (not isinstance(user, str) or len(user) > MAX_USER_CHARS):
        raise FactsError(f"facts.user must be a string of at most {MAX_USER_CHARS} characters")
    truncated = value.get("truncated", False)
    if not isinstance(truncated, bool):
        raise FactsError("facts.truncated must be true or false")
    return AgentFacts(home, user, _parse_paths(value.get("paths")), truncated, reported=True)


def _parse_paths(value: object) -> dict[str, PathFact]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FactsError("facts.paths must be an object")
    if len(value) > MAX_PATHS:
        raise FactsError(f"facts.paths holds more than {MAX_PATHS} paths")
    return {_key(path): _path_fact(path, fact) for path, fact in value.items()}


def _key(path: object) -> str:
    if not is_normal_absolute(path):
        raise FactsError(f"facts.paths key {str(path)[:80]!r} is not a normalised absolute path")
    return str(path)


def _path_fact(path: str, fact: object) -> PathFact:
    if not isinstance(fact, Mapping) or not _FACT_FIELDS.issuperset(fact):
        raise FactsError(f"facts.paths[{path[:80]!r}] must be an object with real, exists and dir")
    real, exists, is_dir = fact.get("real"), fact.get("exists"), fact.get("dir")
    # Most paths lead where they are written: the key is already checked.
    if real is not None and real != path and not is_normal_absolute(real):
        raise FactsError(f"facts.paths[{path[:80]!r}].real must be a normalised absolute path")
    for name, flag in (("exists", exists), ("dir", is_dir)):
        if flag is not None and flag is not True and flag is not False:
            raise FactsError(f"facts.paths[{path[:80]!r}].{name} must be true, false or null")
    return PathFact(real, exists, is_dir)


def facts_to_dict(facts: AgentFacts) -> dict[str, Any]:
    """The wire shape of ``facts`` (what ``parse_facts`` reads)."""
    return {
        "home": facts.home,
        "user": facts.user,
        "paths": {p: {"real": f.real, "exists": f.exists, "dir": f.dir} for p, f in facts.paths.items()},
        "truncated": facts.truncated,
    }
