"""Path normalisation, working-directory membership and protected paths."""

from __future__ import annotations

import fnmatch
import functools
import os.path
from collections.abc import Iterable
from dataclasses import dataclass, field

from policy.facts import NO_FACTS, AgentFacts

# Writes here change how the repository, the agent, the editor or the user's shell
# behaves next time (hooks, fsmonitor, tasks, aliases, build wrappers), so they are a
# safety check that asks in every mode, bypassPermissions included. Matched without
# regard to case: on case-insensitive file systems ``.GIT/hooks`` is ``.git/hooks``.
PROTECTED_DIRS = (
    ".git",
    ".claude",
    ".vscode",
    ".idea",
    ".husky",
    ".config/git",
    ".cargo",
    ".devcontainer",
    ".yarn",
    ".mvn",
)


def _by_head(entries: Iterable[str]) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """Each entry as its components, under its first one, in the order given."""
    found: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for entry in entries:
        parts = tuple(entry.split("/"))
        found.setdefault(parts[0], []).append((entry, parts))
    return found


# A path's components meet only the protected directories that start with them.
_PROTECTED_DIRS_BY_HEAD = _by_head(PROTECTED_DIRS)
# Claude Code exempts only this: worktrees it creates for agents.
PROTECTED_EXEMPT = (".claude/worktrees",)
PROTECTED_FILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".bash_aliases",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".zlogout",
        ".cshrc",
        ".tcshrc",
        ".kshrc",
        ".inputrc",
        ".envrc",
        ".gitconfig",
        ".gitmodules",
        ".mcp.json",
        ".claude.json",
        ".ripgreprc",
        ".npmrc",
        ".pypirc",
        ".netrc",
        "bunfig.toml",
        ".bazelrc",
        ".pre-commit-config.yaml",
        "gradle-wrapper.properties",
        "maven-wrapper.properties",
        "pyrightconfig.json",
    }
)
# Families of names: every ``.yarnrc*`` and lefthook's config files in all their spellings.
PROTECTED_FILE_PREFIXES = (".yarnrc", "lefthook.", "lefthook-local.", ".lefthook.", ".lefthook-local.")
DEVICE_PREFIXES = ("/dev/", "/proc/", "/sys/")
HARMLESS_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


@dataclass(frozen=True)
class NormalPath:
    """A path as written (``lexical``) and with symlinks resolved (``real``).

    ``known`` is False when the agent did not report where the path leads: ``real`` is
    then only the lexical path, and nothing may be allowed on the strength of it.
    """

    lexical: str
    real: str
    known: bool = True

    def variants(self) -> tuple[str, ...]:
        if self.lexical == self.real:
            return (self.lexical,)
        return (self.lexical, self.real)


def expand_home(path: str, home: str) -> str:
    """``~``, ``~/x`` and ``~USER/x`` where USER owns ``home`` (its last component)."""
    if path == "~":
        return home
    # What follows the ``~`` is joined under the home even when it starts with more
    # slashes: ``~//.ssh`` is ``$HOME//.ssh`` to bash, where os.path.join would start over.
    if path.startswith("~/"):
        return os.path.join(home, path[2:].lstrip("/"))
    if path.startswith("~") and home not in ("", "/"):
        user, _, rest = path[1:].partition("/")
        if user == os.path.basename(home.rstrip("/")):
            return os.path.join(home, rest.lstrip("/")) if rest else home
    return path


def names_home(path: str) -> bool:
    """``~``, ``~/…`` or ``~user/…``: a path that means nothing until the home is known."""
    return path.startswith("~")


@functools.lru_cache(maxsize=1024)
def lexical_path(path: str, cwd: str, home: str) -> str:
    """Resolve ``~``, relative segments and ``..`` against cwd, without touching the disk.

    Cached: a working directory and the names its commands use recur call after call,
    and normpath is the costly part of resolving one.
    """
    base = cwd if os.path.isabs(cwd) else "/"
    expanded = expand_home(path.replace("\x00", ""), home)
    lexical = os.path.normpath(os.path.join(base, expanded))
    if lexical.startswith("//"):
        lexical = "/" + lexical.lstrip("/")
    return lexical


def normalise(path: str, cwd: str, home: str | None, facts: AgentFacts = NO_FACTS) -> NormalPath:
    """Resolve ``~``, relative segments and ``..`` against cwd, then symlinks (as reported)."""
    if home is None and names_home(path):
        # Where ``~`` is, only the agent knows; "~/x" is no path on this side.
        return NormalPath(path, path, known=False)
    lexical = lexical_path(path, cwd, home or "/")
    real = facts.real(lexical)
    if real is None:
        return NormalPath(lexical, lexical, known=False)
    return NormalPath(lexical, real)


@dataclass
class PathResolver:
    """Resolve paths for one decision from the agent's facts, each distinct path once.

    - Create one per decision and drop it with the decision: the facts describe the
      agent's disk at the moment of this call, never of the next one.
    """

    cwd: str
    home: str | None
    facts: AgentFacts = NO_FACTS
    _seen: dict[str, NormalPath] = field(default_factory=dict, repr=False)

    def normalise(self, path: str) -> NormalPath:
        found = self._seen.get(path)
        if found is None:
            found = self._seen[path] = normalise(path, self.cwd, self.home, self.facts)
        return found


def working_directories(
    cwd: str, additional: Iterable[str], home: str | None, facts: AgentFacts = NO_FACTS
) -> tuple[str, ...]:
    """Return the absolute working directories, as written and as the agent resolved them."""
    roots: list[str] = []
    for entry in (cwd, *additional):
        if not isinstance(entry, str) or not entry:
            continue
        if not os.path.isabs(entry) and not entry.startswith("~"):
            entry = os.path.join(cwd or "/", entry)
        resolved = normalise(entry, cwd or "/", home, facts)
        if not os.path.isabs(resolved.lexical):
            continue  # "~/x" with no home reported: no directory to work in
        for candidate in resolved.variants():
            if candidate not in roots:
                roots.append(candidate)
    return tuple(roots)


UNREPORTED = "the agent did not report"


def unreported(path: NormalPath, home: str | None) -> str | None:
    """What the agent did not report that deciding on ``path`` needs, or None."""
    if not path.known:
        return f"{UNREPORTED} where {path.lexical} leads"
    if home is None:
        return f"{UNREPORTED} its home directory"
    return None


def is_inside(path: str, root: str) -> bool:
    if root == "/":
        return path.startswith("/")
    return path == root or path.startswith(root + "/")


def inside_any(path: NormalPath, roots: Iterable[str]) -> bool:
    """True only if both the lexical and the resolved path lie in a working directory."""
    roots = tuple(roots)
    return all(any(is_inside(v, r) for r in roots) for v in path.variants())


def protected_reason(path: NormalPath) -> str | None:
    """Name the protected location a write would touch, or None (case-insensitive)."""
    for candidate in path.variants():
        parts = candidate.lower().split("/")
        name = parts[-1]
        if name in PROTECTED_FILES or name.startswith(PROTECTED_FILE_PREFIXES):
            return f"{candidate.split('/')[-1]} configures your shell, repository or tools"
        found = _protected_dir(parts)
        if found:
            return f"{found}/ is a protected directory ({candidate})"
    return None


def _protected_dir(parts: list[str]) -> str | None:
    """The protected directory ``parts`` (lower-cased) is, or lies in, if any."""
    for index, part in enumerate(parts):
        for entry, entry_parts in _PROTECTED_DIRS_BY_HEAD.get(part, ()):
            if tuple(parts[index : index + len(entry_parts)]) != entry_parts:
                continue
            tail = "/".join(parts[index:])
            if any(tail == e or tail.startswith(e + "/") for e in PROTECTED_EXEMPT):
                continue
            return entry
    return None


def critical_removal(path: NormalPath, home: NormalPath | None, cwd: NormalPath | None) -> str | None:
    """Why removing ``path`` is a dangerous removal in Claude Code 2.1.332's terms, or None.

    - Critical: ``/``, a path ending in ``/*``, a top-level directory (``/usr``, ``/etc``),
      the home; then the working directory or any of its ancestors.
    - Checked as written (``~``, ``$HOME`` and ``..`` already resolved; a glob taken
      literally, as Claude Code does: ``/u*`` is a top-level name) and where the agent
      reported its symlinks lead.
    """
    if not os.path.isabs(path.lexical):
        # ``~`` with no home reported: it is the home, wherever that is.
        bare = path.lexical.rstrip("/")
        return f"critical path: {path.lexical}" if bare == "~" or path.lexical.endswith("/*") else None
    homes = home.variants() if home is not None and os.path.isabs(home.lexical) else ()
    for candidate in path.variants():
        if candidate == "/" or candidate.endswith("/*") or os.path.dirname(candidate) == "/" or candidate in homes:
            return f"critical path: {candidate}"
    for candidate in path.variants():
        if cwd is not None and any(is_inside(c, candidate) for c in cwd.variants()):
            return f"working directory or its ancestor: {candidate}"
    return None


_PROTECTED_NAMES = tuple(sorted({*PROTECTED_FILES, *(d.split("/")[0] for d in PROTECTED_DIRS)}))


def could_be_protected(word: str, resolver: PathResolver) -> bool:
    """Could a glob or expansion the shell fills in name a protected path?

    The known directory before the first wildcard is checked as a path; each glob
    segment after it is compared with the protected names. A shell glob skips names
    starting with "." unless it starts with one (``rm -rf *`` leaves ``.git``).
    Expansions (``$X``) and another user's ``~bob`` could be anything.
    """
    if "$" in word or "`" in word or (word.startswith("~") and expand_home(word, resolver.home or "") == word):
        return True
    cut = min((word.find(c) for c in "*?[" if c in word), default=len(word))
    slash = word.rfind("/", 0, cut)
    directory = word[: slash + 1] if slash >= 0 else "."
    if protected_reason(resolver.normalise(directory)):
        return True
    for segment in word[slash + 1 :].lower().split("/"):
        if any(_glob_meets(name, segment) for name in _PROTECTED_NAMES):
            return True
        if any(segment.startswith(p) for p in PROTECTED_FILE_PREFIXES):
            return True
    return False


def _glob_meets(name: str, segment: str) -> bool:
    if name.startswith(".") and not segment.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, segment) or any(
        fnmatch.fnmatchcase(prefix + "x", segment) for prefix in PROTECTED_FILE_PREFIXES
    )


def device_reason(path: NormalPath) -> str | None:
    for candidate in path.variants():
        if candidate in HARMLESS_DEVICES:
            continue
        if candidate.startswith(DEVICE_PREFIXES):
            return f"{candidate} is a device or kernel file"
    return None


# Credentials and keys: a command that names one never auto-allows.
SENSITIVE_HOME = (
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".azure",
    ".config/gcloud",
    ".docker/config.json",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".config/gh",
)
SENSITIVE_ABSOLUTE = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/root")


def sensitive_reason(path: NormalPath, home: str) -> str | None:
    for candidate in path.variants():
        for entry in SENSITIVE_HOME:
            if is_inside(candidate, os.path.join(home, entry)):
                return f"{candidate} holds credentials"
        for entry in SENSITIVE_ABSOLUTE:
            if is_inside(candidate, entry) and not is_inside(home, entry):
                return f"{candidate} is a sensitive system path"
    return None


def looks_like_path(word: str) -> bool:
    return word.startswith(("/", "~", "./", "../")) or "/" in word or word == ".."
