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


def word_of(node: Node) -> Word:
    value, dynamic, ifs_value = _value(node)
    return Word(value, dynamic, node.start_byte, node.end_byte, ifs_value)


def _text(node: Node) -> str:
    raw = node.text
    return raw.decode("utf-8", "replace") if raw is not None else ""


def _value(node: Node) -> tuple[str, bool, str]:
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
        if string_mode and child.type == "string_content":
            text = _STRING_ESCAPES.sub(r"\1", _text(child))
            values.append(text)
            ifs_values.append(text)
            continue
        if not string_mode and child.type == "word" and _text(child) in ("{", "}"):
            # tree-sitter splits ``{a,b}`` into words; brace expansion is dynamic.
            dynamic = True
        value, child_dynamic, ifs_value = _value(child)
        values.append(value)
        ifs_values.append(ifs_value)
        dynamic = dynamic or child_dynamic
    return "".join(values), dynamic, "".join(ifs_values)


def _decode_ansi_c(body: str) -> str:
    try:
        return codecs.decode(body.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return body
