"""Make what a person cannot see on a card visible: hidden characters, whitespace, blank tails.

An agent's input is shown to someone about to allow it. Characters that render as
nothing (zero-width spaces, joiners, the byte-order mark), that reorder the text around
them (bidi controls: "Trojan Source"), that look like a plain space but are not (NBSP,
ideographic space), control characters, long runs of spaces and rows of blank lines can
all hide what will really run. Each becomes a visible, labelled marker; the card then
says how many it found. Everything returned is escaped: nothing from the agent is ever
marked safe as it came.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

# Short labels for the invisible characters people meet most; others show as U+XXXX.
NAMED = {
    "\u00a0": "NBSP",
    "\u00ad": "SHY",
    "\u034f": "CGJ",
    "\u061c": "ALM",
    "\u180e": "MVS",
    "\u200b": "ZWSP",
    "\u200c": "ZWNJ",
    "\u200d": "ZWJ",
    "\u200e": "LRM",
    "\u200f": "RLM",
    "\u2028": "LSEP",
    "\u2029": "PSEP",
    "\u202a": "LRE",
    "\u202b": "RLE",
    "\u202c": "PDF",
    "\u202d": "LRO",
    "\u202e": "RLO",
    "\u202f": "NNBSP",
    "\u2060": "WJ",
    "\u2066": "LRI",
    "\u2067": "RLI",
    "\u2068": "FSI",
    "\u2069": "PDI",
    "\u3000": "IDSP",
    "\u3164": "HF",
    "\ufeff": "BOM",
    "\r": "CR",
    "\x1b": "ESC",
    "\x7f": "DEL",
}
# Letters that draw nothing (Hangul fillers, the Braille blank) and variation selectors.
BLANK_LETTERS = {"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800"}
# A run of spaces or tabs this long inside a line becomes a marker; at the start of a
# line (indentation in a here-doc or a script) only past LONG_INDENT.
LONG_RUN = 8
LONG_INDENT = 16
# This many blank lines in a row or more collapse into one marker line.
BLANK_LINES = 3
SPACE_RUN = re.compile(r"[ \t]+")
# Printable ASCII, tabs and newlines: `is_hidden` is false for each of these characters
# (tests/approvals/test_invisible_plain.py checks all 128), so a text made of them alone,
# most of what an agent sends, needs no look at each character.
PLAIN = re.compile(r"[\t\n\x20-\x7e]*")


def plain(text: str) -> bool:
    """Whether `text` holds no hidden character because it is printable ASCII only."""
    return PLAIN.fullmatch(text) is not None


def is_hidden(char: str) -> bool:
    """Whether `char` draws nothing, reorders text, or passes for a plain space."""
    if char in ("\n", "\t", " "):
        return False
    if char in NAMED or char in BLANK_LETTERS:
        return True
    category = unicodedata.category(char)
    if category in ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp", "Zs"):
        return True
    codepoint = ord(char)
    return 0xFE00 <= codepoint <= 0xFE0F or 0xE0100 <= codepoint <= 0xE01EF


def label(char: str) -> str:
    """The marker text of one hidden character: its short name, else its code point."""
    return NAMED.get(char) or f"U+{ord(char):04X}"


def _title(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, 'control character')}"


def marker(char: str) -> SafeString:
    return format_html('<span class="hc" title="{}">⟨{}⟩</span>', _title(char), label(char))


def count_hidden(text: str) -> int:
    """How many hidden characters `text` holds (the card's warning counts them)."""
    if plain(text):
        return 0
    return sum(1 for char in text if is_hidden(char))


def spelled_out(text: str) -> str:
    """`text` as plain text (for an attribute) with each hidden character spelled ⟨NAME⟩."""
    if plain(text):
        return text
    return "".join(f"⟨{label(char)}⟩" if is_hidden(char) else char for char in text)


def reveal(text: str) -> SafeString:
    """`text` escaped, each hidden character replaced by its visible marker."""
    if plain(text) or not any(is_hidden(char) for char in text):
        return escape(text)
    parts = [marker(char) if is_hidden(char) else escape(char) for char in text]
    return mark_safe("".join(parts))  # noqa: S308 - every part is escaped or a constant marker


def reveal_spaces(text: str, *, line_start: bool = False) -> SafeString:
    """A run of spaces/tabs: kept as it is when short, else one marker saying how long."""
    limit = LONG_INDENT if line_start else LONG_RUN
    if len(text) < limit:
        return escape(text)
    tabs = text.count("\t")
    what = f"{len(text)} spaces" if not tabs else f"{len(text) - tabs} spaces, {tabs} tabs"
    return format_html('<span class="ws-run" title="{}">␣\u00d7{}</span> ', what, len(text))


def pieces(text: str, *, line_start: bool = False) -> list[tuple[str, str]]:
    """`text` as (kind, source) pieces: "text" (nothing hidden), "hidden" (one character) or
    "run" (spaces/tabs). The web card (HTML) and the chat cards (plain text) both render these.

    - `line_start`: `text` begins a line, so a leading run is indentation.
    """
    found: list[tuple[str, str]] = []

    def visible(part: str) -> None:
        if plain(part):
            if part:
                found.append(("text", part))
            return
        start = 0
        for index, char in enumerate(part):
            if is_hidden(char):
                if index > start:
                    found.append(("text", part[start:index]))
                found.append(("hidden", char))
                start = index + 1
        if start < len(part):
            found.append(("text", part[start:]))

    position = 0
    for run in SPACE_RUN.finditer(text):
        visible(text[position : run.start()])
        found.append(("run", run.group()))
        position = run.end()
    visible(text[position:])
    return found


def reveal_whitespace(text: str, *, line_start: bool = False) -> SafeString:
    """`text` with hidden characters and long space runs made visible.

    - `line_start`: `text` begins a line, so a leading run is indentation.
    """
    parts: list[str] = []
    for kind, source in pieces(text, line_start=line_start):
        if kind == "hidden":
            parts.append(marker(source))
        elif kind == "run":
            parts.append(reveal_spaces(source, line_start=line_start and not parts))
        else:
            parts.append(escape(source))
    return mark_safe("".join(parts))  # noqa: S308 - every part escaped, or a marker of escaped text


def spaces_text(run: str, *, line_start: bool = False) -> str:
    """A run of spaces/tabs as plain text: kept when short, else a "␣" marker with its length."""
    limit = LONG_INDENT if line_start else LONG_RUN
    return run if len(run) < limit else f"␣\u00d7{len(run)} "


def piece_text(kind: str, source: str, *, line_start: bool = False) -> str:
    """One piece of `pieces` as plain text: a hidden character as ⟨NAME⟩, a long run as a "␣" count."""
    if kind == "hidden":
        return f"⟨{label(source)}⟩"
    if kind == "run":
        return spaces_text(source, line_start=line_start)
    return source


@dataclass(frozen=True)
class Lines:
    """A text cut into what to show: lines, blank runs collapsed, and the tail the text ends with."""

    shown: list[str | int]  # a line, or the number of blank lines collapsed at that place
    trailing_newlines: int
    # How many characters of the text each entry of `shown` stands for, its newline included.
    sizes: list[int] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.shown)


def split_lines(text: str) -> Lines:
    """Lines of `text`; runs of BLANK_LINES or more blank lines become one count."""
    body = text.rstrip("\n")
    trailing = len(text) - len(body)
    shown: list[str | int] = []
    sizes: list[int] = []
    blanks: list[str] = []
    for line in body.split("\n") if body else []:
        if line.strip(" \t") == "":
            blanks.append(line)
            continue
        _flush_blanks(shown, sizes, blanks)
        shown.append(line)
        sizes.append(len(line) + 1)
    _flush_blanks(shown, sizes, blanks)
    return Lines(shown, trailing, sizes)


def _flush_blanks(shown: list[str | int], sizes: list[int], blanks: list[str]) -> None:
    if len(blanks) >= BLANK_LINES:
        shown.append(len(blanks))
        sizes.append(sum(len(blank) + 1 for blank in blanks))
    else:
        shown.extend(blanks)
        sizes.extend(len(blank) + 1 for blank in blanks)
    blanks.clear()


def blank_text(count: int) -> str:
    return f"⋮ {count} blank lines"


def trailing_text(count: int) -> str:
    return f"↵ ends with {count} newlines"


def blank_marker(count: int) -> SafeString:
    return format_html('<span class="ws-lines">{}</span>', blank_text(count))


def trailing_marker(count: int) -> SafeString:
    return format_html('<span class="ws-lines">{}</span>', trailing_text(count))


def line_text(line: str) -> str:
    """One line as plain text: hidden characters as ⟨NAME⟩, long space runs as a "␣" count."""
    parts = pieces(line, line_start=True)
    return "".join(piece_text(kind, source, line_start=index == 0) for index, (kind, source) in enumerate(parts))


@dataclass(frozen=True)
class Shown:
    """What a surface showing plain text (a chat card) shows of a text, and what it left out."""

    text: str  # hidden characters, space runs and blank runs made visible
    hidden: int  # hidden characters in the whole text, shown or not
    more_chars: int = 0  # characters of the text past the cut
    more_lines: int = 0  # lines of the text past the cut (the cut one counted when it was cut inside)

    @property
    def cut(self) -> bool:
        return bool(self.more_chars)


def shown_text(text: str, limit: int) -> Shown:
    """`text` as plain text of at most about `limit` characters, made visible as on the web card.

    - Runs of blank lines collapse to "⋮ N blank lines", 2 or more trailing newlines are counted.
    - Cut only between pieces (never inside a marker); what is left out is counted, so a
      surface can say how much it did not show.
    """
    lines = split_lines(text)
    rows: list[str] = []
    used = 0
    consumed = 0
    for entry, size in zip(lines.shown, lines.sizes, strict=True):
        row = blank_text(entry) if isinstance(entry, int) else line_text(entry)
        if used + len(row) + 1 <= limit:
            rows.append(row)
            used += len(row) + 1
            consumed += size
            continue
        if isinstance(entry, str):
            partial, taken = _partial_line(entry, limit - used - 1)
            if taken:
                rows.append(partial)
                consumed += taken
        break
    else:
        if lines.trailing_newlines > 1:
            rows.append(trailing_text(lines.trailing_newlines))
        consumed = len(text)
    rest = text[consumed:]
    more_lines = len(rest.strip("\n").split("\n")) if rest.strip("\n") else 0
    return Shown("\n".join(rows), count_hidden(text), len(rest), more_lines)


def _partial_line(line: str, budget: int) -> tuple[str, int]:
    """The start of `line` that fits in `budget` characters as plain text, and its source length."""
    out: list[str] = []
    used = 0
    taken = 0
    for index, (kind, source) in enumerate(pieces(line, line_start=True)):
        piece = piece_text(kind, source, line_start=index == 0)
        if used + len(piece) > budget:
            if kind == "text" and budget > used:
                out.append(source[: budget - used])
                taken += budget - used
            break
        out.append(piece)
        used += len(piece)
        taken += len(source)
    return "".join(out), taken
