"""Words only known at run time that could meet a deny or ask rule (SPEC §5, expansion).

``$HOME``, ``${HOME}``, ``~`` and ``~USER`` (the request's own home) are resolved before
rules are matched. What cannot be resolved — other expansions, globs (``~/.ss?``),
another user's ``~bob``, a computed command name (``$X``, ``r?``) — is compared with
the deny and ask rules as a pattern: when some value it could take would match one,
the call is reserved for a person (an ask that no mode, allow rule or classifier
answers). The comparison over-approximates: two wildcards are assumed to meet.
"""

from __future__ import annotations

import fnmatch
import os.path
import re

from policy.pipeline.context import CallContext
from policy.rules.compiled import CompiledRule, CompiledRules
from policy.shell.commands import SimpleCommand
from policy.shell.words import plain_home, tilde_user

_UNKNOWN_START = re.compile(r"[*?\[$`]")
_EXPANSION = re.compile(r"[$`]")
_BRACES = re.compile(r"\{[^{}]*\}")
_NAME_PATTERN_CHARS = 256
# A group bash expands: alternatives or a sequence (``{}`` and ``{x}`` stay as written).
_EXPANDING_BRACES = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")


def _name_pattern(name: str) -> str:
    """A computed command name as a glob: each brace expansion could be any of its words.

    ``c{u,}rl`` runs ``curl``; as ``c*rl`` it meets a ``curl`` rule. A brace the parser
    left unpaired is a wildcard too, and so is all past the first ``_NAME_PATTERN_CHARS``
    (a rule names a command in a word; a glob of thousands of stars compiles slowly).
    """
    if len(name) > _NAME_PATTERN_CHARS:
        name = name[:_NAME_PATTERN_CHARS] + "*"
    while (braced := _BRACES.sub("*", name)) != name:
        name = braced
    return name.replace("{", "*").replace("}", "*")


def reserved_by_unresolved(rules: CompiledRules, behavior: str, ctx: CallContext) -> tuple[CompiledRule, str] | None:
    """A ``behavior`` (deny or ask) rule some unresolved word could match, and the word."""
    analysis = ctx.analysis
    if analysis is None:
        return None
    for command in analysis.commands:
        found = _command_rule(rules, behavior, command) or _path_rule(rules, behavior, command, ctx)
        if found is not None:
            return found
    return None


def _command_rule(rules: CompiledRules, behavior: str, command: SimpleCommand) -> tuple[CompiledRule, str] | None:
    index = rules.lookup("Bash", behavior)
    if index is None or not command.words:
        return None
    if command.dynamic_name:
        name = command.words[0]
        pattern = _name_pattern(name)
        unknown = _UNKNOWN_START.search(pattern)
        known = pattern[: unknown.start()] if unknown else pattern
        # ``rm$X`` could be ``rm``; report the rule its known start points at first.
        keys = sorted(index.by_word, key=lambda key: (not key.startswith(known), key not in name))
        for key in keys:
            if _EXPANSION.search(name) or fnmatch.fnmatchcase(key, pattern):
                return index.by_word[key][0], name
        return (index.other[0], name) if index.other else None
    if not command.unresolved:
        return None
    first = next(i for i, word in enumerate(command.words) if i > 0 and word in command.unresolved)
    prefix = " ".join((command.name, *command.words[1:first])) + " "
    for rule in (*index.by_word.get(command.name, ()), *index.other):
        head = rule.command.glob.pieces[0] if rule.command is not None else ""
        # The unknown word could supply whatever the rule needs after this prefix.
        if prefix.startswith(head) or head.startswith(prefix):
            return rule, command.words[first]
    return None


def _path_rule(
    rules: CompiledRules, behavior: str, command: SimpleCommand, ctx: CallContext
) -> tuple[CompiledRule, str] | None:
    words = [w for w in command.unresolved if not _own_home(w, ctx.home)]
    if not words:
        return None
    candidates = [
        rule
        for key in ("Read", "Edit")
        if (index := rules.lookup(key, behavior)) is not None
        for rule in index.other
        if rule.path is not None and rule.active(ctx.now)
    ]
    for word in words:
        directory, segments, open_end = _operand_pattern(word, ctx)
        for rule in candidates:
            if _could_match(rule, directory, segments, open_end, ctx):
                return rule, word
    return None


def _own_home(word: str, home: str | None) -> bool:
    user = tilde_user(word)
    if home is None:
        return False  # the agent did not report its home: ``~`` could be anywhere
    known = user is not None and user == os.path.basename(home.rstrip("/")) and not _UNKNOWN_START.search(word)
    return known


def _operand_pattern(word: str, ctx: CallContext) -> tuple[str, list[str], bool]:
    """Split ``word`` into a known directory and the glob segments the shell fills in."""
    if tilde_user(word) is not None and not _own_home(word, ctx.home):
        return "/", [], True  # another user's home: it could be anywhere
    if "{" in word or "}" in word:
        braced = _operand_braces(word)
        if braced is None:
            return "/", [], True
        word = braced
    match = _UNKNOWN_START.search(word)
    cut = match.start() if match else len(word)
    slash = word.rfind("/", 0, cut)
    known, rest = (word[: slash + 1], word[slash + 1 :]) if slash >= 0 else ("", word)
    directory = ctx.resolver.normalise(known or ".").lexical
    segments: list[str] = []
    for segment in rest.split("/"):
        if _EXPANSION.search(segment):
            return directory, segments, True
        segments.append(segment)
    return directory, segments, False


def _operand_braces(word: str) -> str | None:
    """``word`` with each brace expansion as what it could fill in; None for anywhere.

    ``~/.ss{h,}/id`` reads ``~/.ssh/id``: a group is one segment's ``*``, or, holding a
    ``/``, an expansion of any number of segments. A group that starts the word with an
    alternative from ``/`` or ``~`` (``{README.md,~/.ssh/id}``) could put it anywhere.
    A brace that expands nothing (``find -exec … {}``) is the character it is.
    """
    word = plain_home(word)
    while match := _EXPANDING_BRACES.search(word):
        body = match.group(0)[1:-1]
        if match.start() == 0 and any(alternative.startswith(("/", "~", "$")) for alternative in body.split(",")):
            return None
        word = word[: match.start()] + ("$" if "/" in body or "$" in body else "*") + word[match.end() :]
    return word


def _could_match(rule: CompiledRule, directory: str, segments: list[str], open_end: bool, ctx: CallContext) -> bool:
    assert rule.path is not None
    root = {"abs": "/", "home": ctx.home, "cwd": ctx.project_root}[rule.path.root]
    if root is None:
        return True  # a ``~`` rule and no reported home: it could match
    relative = ctx.relative_to_roots(directory)[rule.path.root]
    if directory == root.rstrip("/") or (directory == "/" and root == "/"):
        relative = ""
    elif relative is None:
        # The directory is above the rule's root: a wildcard could reach into it.
        return (open_end or bool(segments)) and _is_inside(root, directory)
    known = [s for s in (relative or "").split("/") if s]
    return rule.path.glob.could_match(known + segments, open_end)


def _is_inside(path: str, directory: str) -> bool:
    return directory == "/" or path.startswith(directory.rstrip("/") + "/")
