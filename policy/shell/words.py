"""Static values of tree-sitter-bash argument nodes, as the shell would see them."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from tree_sitter import Node

# Node types whose value is only known when the command runs.
DYNAMIC_TYPES = frozenset(
    {
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "brace_expression",
    }
)
_IFS = re.compile(r"^\$(\{IFS\}|IFS)$")
_STRING_ESCAPES = re.compile(r'\\([$`"\\\n])')
_WORD_ESCAPES = re.compile(r"\\(.)", re.DOTALL)


@dataclass(frozen=True)
class Word:
    """One shell word: its static value and whether expansion could change it."""

    value: str
    dynamic: bool
    start: int
    end: int
    # The value with ``$IFS`` read as a space, so ``rm${IFS}-rf`` still looks like rm.
    ifs_value: str = ""
    # Unquoted ``*``, ``?`` or ``[``: the shell replaces the word with matching names.
    glob: bool = False

    @property
    def unresolved(self) -> bool:
        """Only known when the command runs: an expansion, a glob, or ``~user``."""
        return self.dynamic or self.glob or tilde_user(self.value) is not None


_BRACED_HOME = re.compile(r"\$\{HOME\}(?=[/,}]|$)")


def plain_home(value: str) -> str:
    """``${HOME}`` spelled ``$HOME`` where the two are one (before ``/``, ``,``, ``}`` or the
    end), so a brace group holding it (``{cat,${HOME}/.ssh/id}``) reads as one group."""
    return _BRACED_HOME.sub("$HOME", value)


def tilde_user(value: str) -> str | None:
    """``~bob/x`` → ``bob``; None for ``~``, ``~/x`` and words not starting with ``~``."""
    if not value.startswith("~") or value == "~" or value.startswith("~/"):
        return None
    return value[1:].split("/", 1)[0]


_HOME = frozenset({"$HOME", "${HOME}"})
_GLOB_CHARS = re.compile(r"(?<!\\)[*?\[]")


def word_of(node: Node) -> Word:
    value, dynamic, ifs_value = _value(node, at_start=True)
    return Word(value, dynamic, node.start_byte, node.end_byte, ifs_value, _has_glob(node))


def _has_glob(node: Node) -> bool:
    if node.type == "word":
        return _GLOB_CHARS.search(_text(node)) is not None
    if node.type == "concatenation":
        return any(_has_glob(child) for child in node.children)
    return False


def _text(node: Node) -> str:
    raw = node.text
    return raw.decode("utf-8", "replace") if raw is not None else ""


def _value(node: Node, at_start: bool = False) -> tuple[str, bool, str]:
    kind = node.type
    if kind == "word":
        text = _WORD_ESCAPES.sub(r"\1", _text(node).replace("\\\n", ""))
        return text, False, text
    if kind in ("number", "variable_name", "test_operator"):
        text = _text(node)
        return text, False, text
    if kind == "raw_string":
        text = _text(node)[1:-1]
        return text, False, text
    if kind == "ansi_c_string":
        text = _decode_ansi_c(_text(node)[2:-1])
        return text, True, text
    if kind in ("string", "translated_string"):
        return _join(node, string_mode=True)
    if kind == "concatenation":
        return _join(node, string_mode=False)
    if kind in DYNAMIC_TYPES:
        text = _text(node)
        if at_start and text in _HOME:
            # ``$HOME/.ssh`` is ``~/.ssh``: resolved against the request's home, like ``~``.
            return "~", False, "~"
        return text, True, (" " if _IFS.match(text) else text)
    text = _text(node)
    return text, True, text


def _join(node: Node, *, string_mode: bool) -> tuple[str, bool, str]:
    values: list[str] = []
    ifs_values: list[str] = []
    dynamic = False
    for child in node.children:
        if string_mode and child.type == '"':
            continue
        at_start = not values
        if string_mode and child.type == "string_content":
            text = _STRING_ESCAPES.sub(r"\1", _text(child))
            values.append(text)
            ifs_values.append(text)
            continue
        if not string_mode and child.type == "word" and _text(child) in ("{", "}"):
            # tree-sitter splits ``{a,b}`` into words; brace expansion is dynamic.
            dynamic = True
        value, child_dynamic, ifs_value = _value(child, at_start=at_start)
        values.append(value)
        ifs_values.append(ifs_value)
        dynamic = dynamic or child_dynamic
    return "".join(values), dynamic, "".join(ifs_values)


def _decode_ansi_c(body: str) -> str:
    try:
        return codecs.decode(body.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return body
