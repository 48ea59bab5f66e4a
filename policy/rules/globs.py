"""Wildcard matchers that run in time bounded by input times pattern, never by backtracking.

Rule wildcards used to become Python regular expressions, and ``re`` backtracks:
``Bash(a*a*a*…*c)`` against a long run of ``a`` took seconds per call and froze the
server. Both matchers here split a pattern at its wildcards and place the literal
pieces greedily from left to right. For a pattern whose only wildcard is "any run of
characters" that is exact: the leftmost place for each middle piece leaves the most
room for the rest, so no earlier choice ever needs to be revisited.

``steps`` on each match counts the candidate positions tried, so tests can bound the
work without timing anything.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from policy.rules.parse import RuleSyntaxError

_UNESCAPED_STAR = re.compile(r"(?<!\\)\*")


@dataclass
class StepCounter:
    """Candidate positions a match tried (a test's measure of the work done)."""

    steps: int = 0


_NO_COUNTER: Final = StepCounter()


@dataclass(frozen=True)
class CommandGlob:
    """A Bash rule body: literal pieces joined by ``*`` (any run of any characters).

    ``word_tail`` accepts, after a full match, whitespace followed by anything
    (``git commit:*`` covers ``git commit`` and ``git commit -m x``, not ``git commitx``).
    """

    pieces: tuple[str, ...]
    word_tail: bool = False

    @classmethod
    def from_body(cls, body: str, *, word_tail: bool) -> CommandGlob:
        parts = _UNESCAPED_STAR.split(body)
        return cls(tuple(p.replace("\\*", "*") for p in parts), word_tail)

    def fullmatch(self, text: str, counter: StepCounter = _NO_COUNTER) -> bool:
        pieces = self.pieces
        first = pieces[0]
        if not text.startswith(first):
            return False
        if len(pieces) == 1:
            rest = len(text) - len(first)
            return rest == 0 or (self.word_tail and text[len(first)].isspace())
        pos = len(first)
        for piece in pieces[1:-1]:
            counter.steps += 1
            found = text.find(piece, pos)
            if found < 0:
                return False
            pos = found + len(piece)
        return self._last_piece(text, pos, counter)

    def _last_piece(self, text: str, pos: int, counter: StepCounter) -> bool:
        last = self.pieces[-1]
        counter.steps += 1
        if not self.word_tail or not last:
            # A trailing ``*`` already covers any tail, so the word tail adds nothing.
            return len(text) - len(last) >= pos and text.endswith(last)
        # The last piece must end the text or be followed by whitespace; each
        # occurrence is tried once, left to right.
        found = text.find(last, pos)
        while found >= 0:
            counter.steps += 1
            end = found + len(last)
            if end == len(text) or text[end].isspace():
                return True
            found = text.find(last, found + 1)
        return False


# --- gitignore path patterns ---------------------------------------------------------

_DOUBLE_STAR = "**"


@dataclass(frozen=True)
class _Atom:
    """One character of a segment glob: a literal, ``?`` (any) or a bracket class."""

    literal: str | None = None
    bracket: re.Pattern[str] | None = None

    def accepts(self, char: str) -> bool:
        if self.literal is not None:
            return char == self.literal
        if self.bracket is not None:
            return self.bracket.fullmatch(char) is not None
        return True


@dataclass(frozen=True)
class SegmentGlob:
    """A glob for one path segment: chunks of fixed-width atoms joined by ``*``."""

    chunks: tuple[tuple[_Atom, ...], ...]
    non_empty: bool = False  # the whole segment is ``*``: gitignore wants one character

    def literal(self) -> str | None:
        """The one name this glob matches, when it has no wildcard."""
        if len(self.chunks) != 1 or any(atom.literal is None for atom in self.chunks[0]):
            return None
        return "".join(atom.literal or "" for atom in self.chunks[0])

    def match(self, segment: str, counter: StepCounter) -> bool:
        if self.non_empty and not segment:
            return False
        chunks = self.chunks
        first = chunks[0]
        if not _chunk_at(first, segment, 0, counter):
            return False
        if len(chunks) == 1:
            return len(segment) == len(first)
        pos = len(first)
        for chunk in chunks[1:-1]:
            found = _find_chunk(chunk, segment, pos, counter)
            if found < 0:
                return False
            pos = found + len(chunk)
        last = chunks[-1]
        start = len(segment) - len(last)
        return start >= pos and _chunk_at(last, segment, start, counter)


def _chunk_at(chunk: tuple[_Atom, ...], text: str, pos: int, counter: StepCounter) -> bool:
    counter.steps += 1
    if pos + len(chunk) > len(text):
        return False
    return all(atom.accepts(text[pos + i]) for i, atom in enumerate(chunk))


def _find_chunk(chunk: tuple[_Atom, ...], text: str, pos: int, counter: StepCounter) -> int:
    if all(atom.literal is not None for atom in chunk):
        counter.steps += 1
        return text.find("".join(atom.literal or "" for atom in chunk), pos)
    for start in range(pos, len(text) - len(chunk) + 1):
        if _chunk_at(chunk, text, start, counter):
            return start
    return -1


@dataclass(frozen=True)
class PathGlob:
    """A gitignore pattern, matched against a relative path one segment at a time.

    Semantics follow pathspec's ``GitIgnoreSpecPattern`` (which rules used to be
    compiled with) with ``regex.match``: a pattern matches a path or anything beneath
    it. ``**`` spans whole segments, so it is the segment-level ``*`` and the same
    greedy placement applies to the groups of segments between ``**``.
    One deliberate difference: a bracket class never matches ``/`` (as in git's own
    wildmatch), where pathspec's ``[!x]`` could match across a segment boundary.
    """

    groups: tuple[tuple[SegmentGlob, ...], ...] = ()
    floating: bool = False  # a leading ``**``: the first group may start at any depth
    needs_more: bool = False  # a trailing ``**`` or ``/``: something must lie beneath
    always: bool | None = None  # pathspec's whole-pattern shortcuts (``**`` and kin)

    def match(self, relative: str, counter: StepCounter = _NO_COUNTER) -> bool:
        if self.always is not None:
            return self.always and relative != ""
        return self._place(relative.split("/"), lambda glob, segment: glob.match(segment, counter))

    def could_match(self, segments: list[str], open_end: bool) -> bool:
        """Could some path the shell makes of these segments match? (over-approximated)

        ``segments`` may hold shell globs (``.ss?``); ``open_end`` means anything may
        follow them (an expansion such as ``$X`` could add any number of segments).
        """
        if self.always is not None:
            return self.always and (bool(segments) or open_end)
        if open_end:
            if self.floating or not self.groups:
                return True
            return all(_could_meet(glob, segment) for glob, segment in zip(self.groups[0], segments, strict=False))
        return self._place(segments, _could_meet)

    def _place(self, segments: list[str], meets: Callable[[SegmentGlob, str], bool]) -> bool:
        pos = 0
        for index, group in enumerate(self.groups):
            anchored = index == 0 and not self.floating
            found = _place_group(group, segments, pos, anchored, meets)
            if found < 0:
                return False
            pos = found + len(group)
        return len(segments) > pos if self.needs_more else True


def _could_meet(glob: SegmentGlob, segment: str) -> bool:
    """Could one name match both the rule's segment glob and the shell's glob?"""
    if not _SHELL_GLOB.search(segment):
        return glob.match(segment, _NO_COUNTER)
    literal = glob.literal()
    if literal is not None:
        return fnmatch.fnmatchcase(literal, segment)
    return True  # two wildcards: assume they can meet


_SHELL_GLOB = re.compile(r"[*?\[]")


def _place_group(
    group: tuple[SegmentGlob, ...],
    segments: list[str],
    pos: int,
    anchored: bool,
    meets: Callable[[SegmentGlob, str], bool],
) -> int:
    last_start = 0 if anchored else len(segments) - len(group)
    for start in range(pos, max(last_start, pos) + 1):
        if start + len(group) > len(segments):
            return -1
        if all(meets(glob, segments[start + i]) for i, glob in enumerate(group)):
            return start
        if anchored:
            return -1
    return -1


def compile_path_glob(pattern: str, rule_text: str) -> PathGlob:
    """Translate a gitignore pattern (already checked by pathspec) into a ``PathGlob``."""
    text = pattern if pattern.endswith("\\ ") else pattern.rstrip()
    segments = text.split("/")
    is_dir = not segments[-1]
    normal = _normalise_segments(segments)
    shortcut = _shortcut(normal, is_dir)
    if shortcut is not None:
        return PathGlob(always=shortcut)
    floating = normal[0] == _DOUBLE_STAR
    needs_more = normal[-1] == _DOUBLE_STAR
    groups: list[tuple[SegmentGlob, ...]] = []
    current: list[SegmentGlob] = []
    for segment in normal:
        if segment == _DOUBLE_STAR:
            if current:
                groups.append(tuple(current))
            current = []
            continue
        current.append(compile_segment(segment, rule_text))
    if current:
        groups.append(tuple(current))
    return PathGlob(tuple(groups), floating, needs_more)


def _normalise_segments(segments: list[str]) -> list[str]:
    # pathspec's rules: a leading "/" anchors; a single segment floats; a trailing
    # "/" means "beneath"; repeated ``**`` collapse.
    normal = list(segments)
    if not normal[0]:
        del normal[0]
    elif (len(normal) == 1 or (len(normal) == 2 and not normal[1])) and normal[0] != _DOUBLE_STAR:
        normal.insert(0, _DOUBLE_STAR)
    if not normal[-1]:
        normal[-1] = _DOUBLE_STAR
    collapsed: list[str] = []
    for segment in normal:
        if not (segment == _DOUBLE_STAR and collapsed and collapsed[-1] == _DOUBLE_STAR):
            collapsed.append(segment)
    return collapsed


def _shortcut(normal: list[str], is_dir: bool) -> bool | None:
    """pathspec answers these with a fixed regex: ``.`` (any path) or one that never matches."""
    if normal == [_DOUBLE_STAR] or normal == [_DOUBLE_STAR, "*"]:
        return not (is_dir and normal == [_DOUBLE_STAR])
    if normal == [_DOUBLE_STAR, "*", _DOUBLE_STAR]:
        return False
    return None


def compile_segment(segment: str, rule_text: str) -> SegmentGlob:
    if segment == "*":
        return SegmentGlob(((), ()), non_empty=True)
    chunks: list[tuple[_Atom, ...]] = []
    current: list[_Atom] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        index += 1
        if char == "\\":
            if index >= len(segment):
                raise RuleSyntaxError(f"{rule_text}: a path pattern cannot end with a backslash")
            current.append(_Atom(literal=segment[index]))
            index += 1
        elif char == "*":
            chunks.append(tuple(current))
            current = []
        elif char == "?":
            current.append(_Atom())
        elif char == "[":
            atom, index = _bracket(segment, index, rule_text)
            current.append(atom)
        else:
            current.append(_Atom(literal=char))
    chunks.append(tuple(current))
    return SegmentGlob(tuple(chunks))


def _bracket(segment: str, start: int, rule_text: str) -> tuple[_Atom, int]:
    """``[...]`` as pathspec reads it (``!`` or ``^`` negates, a leading ``]`` is literal)."""
    end = start
    if end < len(segment) and segment[end] in "!^":
        end += 1
    if end < len(segment) and segment[end] == "]":
        end += 1
    while end < len(segment) and segment[end] != "]":
        end += 1
    if end >= len(segment):
        raise RuleSyntaxError(f"{rule_text}: unclosed '[' in path pattern")
    body = segment[start:end]
    negate = body[:1] in ("!", "^")
    # The class only ever sees one character of one segment, so "/" never reaches it.
    expression = "[" + ("^" if negate else "") + (body[1:] if negate else body).replace("\\", "\\\\") + "]"
    try:
        return _Atom(bracket=re.compile(expression)), end + 1
    except re.error as exc:
        raise RuleSyntaxError(f"{rule_text}: bad bracket expression [{body}]: {exc}") from None
