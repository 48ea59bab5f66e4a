"""Check a tool input against the JSON schema Claude Code sent for the tool: a strict subset.

Only what the gateway needs to refuse a malformed call: the input is an object, every
required key is there, no key the schema does not name (when it says
``additionalProperties: false``), and each top-level value has the schema's type, enum
or const. Nested objects and arrays are checked by type only; Claude Code checks the
rest when the call runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def problems(schema: Mapping[str, Any], value: object) -> list[str]:
    """What is wrong with ``value`` under ``schema``: empty when it fits."""
    if not isinstance(value, dict):
        return ["input: the input must be an object"]
    properties: Mapping[str, Any] = schema.get("properties") or {}
    found = [f"{key}: Field required" for key in schema.get("required") or [] if key not in value]
    if schema.get("additionalProperties") is False:
        found += [f"{key}: Extra inputs are not permitted" for key in value if key not in properties]
    for key, item in value.items():
        if key in properties:
            found += [f"{key}: {problem}" for problem in _value_problems(properties[key], item)]
    return found


def _value_problems(schema: Mapping[str, Any], value: object) -> list[str]:
    if "anyOf" in schema:
        branches = schema["anyOf"]
        if any(not _value_problems(branch, value) for branch in branches):
            return []
        return [f"Input should match one of {len(branches)} shapes"]
    if "const" in schema and value != schema["const"]:
        return [f"Input should be {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return ["Input should be one of " + ", ".join(repr(v) for v in schema["enum"])]
    kinds = schema.get("type")
    if kinds is None:
        return []
    wanted = [kinds] if isinstance(kinds, str) else list(kinds)
    if any(_is(kind, value) for kind in wanted):
        return []
    return [f"Input should be of type {' or '.join(wanted)}"]


def _is(kind: str, value: object) -> bool:
    if isinstance(value, bool) and kind in ("number", "integer"):
        return False  # JSON's true is not a number, though Python's bool is an int
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, (object,)))
