"""Claude Code settings files (``permissions.allow/deny/ask``) in and out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policy.rules.compiled import BEHAVIORS, CompiledRule, CompiledRules, compile_rules
from policy.rules.parse import RuleSyntaxError

MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto")


@dataclass
class LoadedSettings:
    """The permission part of one settings file, tagged with its source."""

    source: str
    items: list[dict[str, Any]]
    rules: CompiledRules
    default_mode: str | None = None
    additional_directories: list[str] = field(default_factory=list)


def settings_items(doc: Mapping[str, Any], source: object) -> list[dict[str, Any]]:
    """Flatten ``permissions.{allow,deny,ask}`` into rule items of ``source``."""
    permissions = doc.get("permissions")
    if not isinstance(permissions, Mapping):
        raise RuleSyntaxError("'permissions' must be an object")
    items: list[dict[str, Any]] = []
    for behavior in BEHAVIORS:
        entries = permissions.get(behavior, [])
        if not isinstance(entries, list):
            raise RuleSyntaxError(f"permissions.{behavior} must be a list of rule strings")
        for entry in entries:
            items.append({"rule": entry, "behavior": behavior, "source": source})
    return items


def load_settings(doc: Mapping[str, Any], source: str) -> LoadedSettings:
    """Read a settings document as rules of ``source``; raise RuleSyntaxError if invalid."""
    if not isinstance(doc, Mapping):
        raise RuleSyntaxError("a settings file must be a JSON object")
    if "permissions" not in doc:
        return LoadedSettings(source, [], CompiledRules())
    items = settings_items(doc, source)
    permissions = doc["permissions"]
    mode = permissions.get("defaultMode")
    if mode is not None and mode not in MODES:
        raise RuleSyntaxError(f"defaultMode {mode!r} is not one of {', '.join(MODES)}")
    directories = permissions.get("additionalDirectories", [])
    if not isinstance(directories, list) or not all(isinstance(d, str) for d in directories):
        raise RuleSyntaxError("additionalDirectories must be a list of paths")
    return LoadedSettings(source, items, compile_rules(items), mode, list(directories))


def export_settings(
    rules: Iterable[CompiledRule | Mapping[str, Any]],
    *,
    default_mode: str | None = None,
    additional_directories: Iterable[str] = (),
) -> dict[str, Any]:
    """Write rules back in Claude Code's settings shape (deny, ask, allow lists)."""
    permissions: dict[str, Any] = {"allow": [], "deny": [], "ask": []}
    for rule in rules:
        if isinstance(rule, CompiledRule):
            text, behavior = rule.text, str(rule.behavior)
        else:
            text, behavior = str(rule["rule"]), str(rule["behavior"])
        if text not in permissions[behavior]:
            permissions[behavior].append(text)
    if default_mode:
        permissions["defaultMode"] = default_mode
    directories = list(additional_directories)
    if directories:
        permissions["additionalDirectories"] = directories
    return {"permissions": permissions}
