"""Compile rule specifiers into matchers: Bash commands, gitignore paths, domains, MCP."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from policy.rules.globs import CommandGlob, PathGlob, compile_path_glob
from policy.rules.parse import MAX_WILDCARDS, RuleSyntaxError

_UNESCAPED_STAR = re.compile(r"(?<!\\)\*")
_STAR_RUNS = re.compile(r"\*+")


@dataclass(frozen=True)
class CommandPattern:
    """A compiled Bash specifier; ``key`` is the literal first word, for indexing."""

    glob: CommandGlob
    key: str | None

    def fullmatch(self, text: str) -> bool:
        return self.glob.fullmatch(text)


def compile_command(content: str, rule_text: str) -> CommandPattern:
    """Exact, ``prefix:*`` or ``*`` wildcard, with Claude Code's word-boundary rules."""
    body = content.strip()
    prefix_rule = body.endswith(":*")
    if prefix_rule:
        body = body[:-2]
    if ":*" in body:
        raise RuleSyntaxError(f"{rule_text}: ':*' is only allowed at the end of the pattern")
    if not body.strip():
        raise RuleSyntaxError(f"{rule_text}: empty command prefix")
    parts = _UNESCAPED_STAR.split(body)
    if len(parts) - 1 > MAX_WILDCARDS:
        raise RuleSyntaxError(f"{rule_text}: at most {MAX_WILDCARDS} wildcards in one rule")
    if prefix_rule:
        # ``git commit:*`` is ``git commit`` alone or followed by whitespace and more.
        glob = CommandGlob.from_body(body, word_tail=True)
    elif len(parts) == 2 and parts[1] == "" and parts[0].endswith(" "):
        # ``git *``: the trailing wildcard is optional, and the space is a word
        # boundary, so it matches ``git`` and ``git status`` but not ``gitk``.
        glob = CommandGlob((parts[0].rstrip(" ").replace("\\*", "*"),), word_tail=True)
    else:
        glob = CommandGlob.from_body(body, word_tail=False)
    return CommandPattern(glob, _first_word_key(parts[0], len(parts)))


def _first_word_key(head: str, parts: int) -> str | None:
    head = head.replace("\\*", "*")
    if not head or head[0].isspace():
        return None
    first, _, rest = head.partition(" ")
    if rest or parts == 1 or head.endswith(" "):
        return first
    return None  # ``Bash(git*)``: the first word itself is a wildcard


@dataclass(frozen=True)
class PathPattern:
    """A gitignore-style path pattern and the directory it is relative to."""

    root: str  # "abs", "home" or "cwd"
    glob: PathGlob
    pattern: str
    anchor: str | None = None  # literal first path segment, when the pattern has one

    def match(self, relative: str) -> bool:
        return self.glob.match(relative)


def compile_path(content: str, rule_text: str) -> PathPattern:
    """``//abs``, ``~/home``, ``/project-root``, ``./cwd`` or bare (gitignore) patterns."""
    text = content.strip()
    if "\x00" in text:
        raise RuleSyntaxError(f"{rule_text}: NUL byte in path pattern")
    if text.startswith("//"):
        root, pattern = "abs", "/" + text[2:].lstrip("/")
    elif text == "~":
        root, pattern = "home", "**"
    elif text.startswith("~/"):
        root, pattern = "home", "/" + text[2:]
    elif text.startswith("./"):
        root, pattern = "cwd", "/" + text[2:]
    else:
        root, pattern = "cwd", text
    if pattern in ("/", ""):
        pattern = "**"
    if len(_STAR_RUNS.findall(pattern)) > MAX_WILDCARDS:
        raise RuleSyntaxError(f"{rule_text}: too many wildcards in one path pattern")
    try:
        # pathspec still validates the pattern; matching uses the linear PathGlob.
        compiled = GitIgnoreSpecPattern(pattern)
    except (ValueError, re.error):
        raise RuleSyntaxError(f"{rule_text}: {content!r} is not a usable path pattern") from None
    if compiled.regex is None or not compiled.include:
        raise RuleSyntaxError(f"{rule_text}: {content!r} is not a usable path pattern")
    return PathPattern(root, compile_path_glob(pattern, rule_text), pattern, _anchor(pattern))


def _anchor(pattern: str) -> str | None:
    """The literal first segment of an anchored gitignore pattern (``src/**`` → src)."""
    body = pattern.lstrip("/")
    # gitignore: a pattern is anchored when it has a slash before its last character.
    anchored = pattern.startswith("/") or "/" in pattern.rstrip("/")
    first = body.split("/", 1)[0]
    if not anchored or not first or any(c in first for c in "*?[\\"):
        return None
    return first


@dataclass(frozen=True)
class DomainPattern:
    """``domain:example.com`` (exact host) or ``domain:*.example.com`` (subdomains)."""

    domain: str

    def matches(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        if self.domain == "*":
            return True
        if self.domain.startswith("*."):
            return host.endswith(self.domain[1:])
        return host == self.domain


def compile_domain(content: str, rule_text: str) -> DomainPattern:
    text = content.strip()
    if not text.startswith("domain:"):
        raise RuleSyntaxError(f"{rule_text}: WebFetch rules take 'domain:HOST', not a URL or other text")
    domain = text[len("domain:") :].strip().lower().rstrip(".")
    if not domain or "/" in domain or " " in domain:
        raise RuleSyntaxError(f"{rule_text}: {domain!r} is not a host name")
    return DomainPattern(domain)
