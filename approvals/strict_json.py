"""JSON as every entry point reads it: text a database, a log or a UTF-8 page can hold.

Python's `json` accepts an escaped lone surrogate (`"\\ud800"`) and returns a string no
UTF-8 encoder can write back, so the failure surfaced later as a 500 while storing or
rendering. Every body and frame is read here instead, and such text is refused as bad
input at the door.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Only an escape can put a surrogate into text that arrived as valid UTF-8.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class LoneSurrogateError(ValueError):
    def __init__(self) -> None:
        super().__init__("the JSON holds a lone UTF-16 surrogate (\\ud800-\\udfff) that is not a character")


def has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if any("\ud800" <= ch <= "\udfff" for ch in item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def refuse_lone_surrogates(text: str | bytes, value: Any) -> Any:
    """Return `value` parsed from `text`, or raise LoneSurrogateError (a ValueError)."""
    raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    if SURROGATE_ESCAPE.search(raw) and has_lone_surrogate(value):
        raise LoneSurrogateError()
    return value


def loads(text: str | bytes, **options: Any) -> Any:
    """`json.loads`, refusing lone surrogates; every failure is a ValueError."""
    return refuse_lone_surrogates(text, json.loads(text, **options))
