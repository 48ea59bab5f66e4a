"""Rule linting: rules that cannot parse, can never match, are shadowed or duplicated."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from policy.rules.compiled import BEHAVIORS, CompiledRule, compile_rule
from policy.rules.parse import RuleSyntaxError
from policy.settings import settings_items
from policy.tools import BUILTIN_TOOLS, is_mcp_name, lookup

_STRENGTH = {behavior: len(BEHAVIORS) - i for i, behavior in enumerate(BEHAVIORS)}
_CONTENT_TOOLS = frozenset({"Bash", "WebFetch", "Task", "Skill", "SlashCommand"})


@dataclass(frozen=True)
class Finding:
    """One lint finding about one rule."""

    kind: str  # invalid | unknownTool | neverMatches | shadowed | duplicate | expired
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.rule}: {self.message}"


def lint_rules(items: Iterable[Any], *, now: datetime | None = None) -> list[Finding]:
    """Lint rule items or settings documents (same shapes ``compile_rules`` takes)."""
    now = now or datetime.now(UTC)
    findings: list[Finding] = []
    compiled: list[CompiledRule] = []
    for item in _flatten(items, findings):
        try:
            rule = compile_rule(item.get("rule"), item.get("behavior"), item.get("source"), item.get("expires_at"))
        except RuleSyntaxError as exc:
            text = str(item.get("rule"))
            findings.append(Finding("invalid", text, str(exc).removeprefix(f"{text}: ")))
            continue
        findings.extend(_single(rule, now))
        findings.extend(_against_earlier(rule, compiled))
        compiled.append(rule)
    return findings


def _flatten(items: Iterable[Any], findings: list[Finding]) -> list[Mapping[str, Any]]:
    flat: list[Mapping[str, Any]] = []
    for item in items:
        if not isinstance(item, Mapping):
            findings.append(Finding("invalid", repr(item), "rule item must be an object"))
        elif "permissions" in item:
            try:
                flat.extend(settings_items(item, item.get("source", "projectSettings")))
            except RuleSyntaxError as exc:
                findings.append(Finding("invalid", "permissions", str(exc)))
        else:
            flat.append(item)
    return flat


def _single(rule: CompiledRule, now: datetime) -> list[Finding]:
    name, text = rule.rule.tool_name, rule.text
    if not rule.active(now):
        return [Finding("expired", text, "the rule has expired and never matches")]
    if name not in BUILTIN_TOOLS and not is_mcp_name(name) and not name.startswith("mcp__"):
        if lookup(name).spec is None:
            return [Finding("unknownTool", text, f"no tool is called {name!r}")]
    content_ok = (rule.command or rule.path or rule.domain) is not None
    if rule.rule.content is not None and not content_ok and name not in _CONTENT_TOOLS:
        return [Finding("neverMatches", text, f"{name} rules take no specifier; use {name!r} alone")]
    return []


def _against_earlier(rule: CompiledRule, earlier: list[CompiledRule]) -> list[Finding]:
    findings: list[Finding] = []
    for other in earlier:
        if other.rule == rule.rule and other.behavior == rule.behavior:
            findings.append(Finding("duplicate", rule.text, f"duplicates the {other.source} rule"))
        elif _covers(other, rule) and _STRENGTH[other.behavior] > _STRENGTH[rule.behavior]:
            findings.append(
                Finding("shadowed", rule.text, f"{other.behavior} rule {other.text} ({other.source}) always wins")
            )
        elif _covers(rule, other) and _STRENGTH[rule.behavior] > _STRENGTH[other.behavior]:
            findings.append(
                Finding("shadowed", other.text, f"{rule.behavior} rule {rule.text} ({rule.source}) always wins")
            )
    return findings


def _covers(wide: CompiledRule, narrow: CompiledRule) -> bool:
    """True when every call ``narrow`` matches is also matched by ``wide`` (best effort)."""
    if wide.rule.tool_name != narrow.rule.tool_name:
        return False
    if wide.rule.content is None:
        return True
    if narrow.rule.content is None:
        return False
    if wide.command is not None and narrow.command is not None:
        literal = narrow.rule.content.removesuffix(":*").rstrip(" *")
        if "*" in literal:
            return False
        extended = narrow.rule.content.endswith(("*",))
        if not wide.command.fullmatch(literal):
            return False
        return not extended or wide.command.fullmatch(literal + " --anything")
    if wide.path is not None and narrow.path is not None:
        return wide.path.root == narrow.path.root and wide.path.pattern in ("**", narrow.path.pattern)
    if wide.domain is not None and narrow.domain is not None:
        return wide.domain.matches(narrow.domain.domain.removeprefix("*."))
    return False
