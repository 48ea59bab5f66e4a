"""Compile rule items into an index keyed by tool name, ready for fast matching."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from policy.rules.parse import Rule, RuleSyntaxError, parse_rule
from policy.rules.patterns import (
    CommandPattern,
    DomainPattern,
    PathPattern,
    compile_command,
    compile_domain,
    compile_path,
)
from policy.tools import BUILTIN_TOOLS, canonical_rule_tool

Behavior = Literal["allow", "deny", "ask"]
BEHAVIORS: tuple[Behavior, ...] = ("deny", "ask", "allow")

# Weakest to strongest. Settings-class order is Claude Code's; session grants are the
# weakest a person makes, and CLI flags sit just below --settings files and managed
# policy. `autopilot` (allow rules Gatehouse saved on its own after repeated approvals)
# is below everything a person wrote, so a reason names it only when no person's rule
# matched: every call it names is one the autopilot approved.
SOURCES: tuple[str, ...] = (
    "autopilot",
    "session",
    "command",
    "userSettings",
    "projectSettings",
    "localSettings",
    "cliArg",
    "flagSettings",
    "policySettings",
)
SOURCE_RANK = {source: rank for rank, source in enumerate(SOURCES)}
PATH_FAMILY = {"Edit": "edit", "Read": "read"}
_CONTENT_FIELDS = {"Task": "subagent_type", "Skill": "skill", "SlashCommand": "command"}


@dataclass(frozen=True)
class CompiledRule:
    """One rule with its behavior, source, expiry and pre-built matcher."""

    rule: Rule
    behavior: Behavior
    source: str
    expires_at: datetime | None = None
    command: CommandPattern | None = None
    path: PathPattern | None = None
    domain: DomainPattern | None = None
    text: str = ""
    rank: int = 0

    def __post_init__(self) -> None:
        # Computed once: matching reads these on every decision.
        object.__setattr__(self, "text", str(self.rule))
        object.__setattr__(self, "rank", SOURCE_RANK[self.source])

    def active(self, now: datetime) -> bool:
        return self.expires_at is None or self.expires_at > now

    def describe(self) -> dict[str, Any]:
        return {"rule": self.text, "source": self.source, "behavior": self.behavior}


@dataclass
class RuleIndex:
    """Rules of one behavior for one tool; Bash rules bucketed by literal first word."""

    whole_tool: list[CompiledRule] = field(default_factory=list)
    by_word: dict[str, list[CompiledRule]] = field(default_factory=dict)
    other: list[CompiledRule] = field(default_factory=list)
    # Path rules by (root, literal first segment); "" holds patterns that can match
    # at any depth. A path only meets the rules that could possibly match it.
    path_buckets: dict[tuple[str, str], list[CompiledRule]] = field(default_factory=dict)

    def add(self, rule: CompiledRule) -> None:
        if rule.rule.content is None:
            self.whole_tool.append(rule)
        elif rule.command is not None and rule.command.key is not None:
            self.by_word.setdefault(rule.command.key, []).append(rule)
        else:
            self.other.append(rule)

    def sort(self) -> None:
        # Strongest source first, so the first match is the one to report.
        for bucket in (self.whole_tool, self.other, *self.by_word.values()):
            bucket.sort(key=lambda r: -r.rank)
        self.path_buckets = {}
        for rule in self.other:  # already strongest first
            if rule.path is not None:
                key = (rule.path.root, rule.path.anchor or "")
                self.path_buckets.setdefault(key, []).append(rule)


@dataclass
class CompiledRules:
    """All rules, indexed by (rule tool name or MCP server) then behavior."""

    rules: list[CompiledRule] = field(default_factory=list)
    index: dict[str, dict[str, RuleIndex]] = field(default_factory=dict)

    def add(self, rule: CompiledRule) -> None:
        self.rules.append(rule)
        key = _index_key(rule.rule)
        per_behavior = self.index.setdefault(key, {b: RuleIndex() for b in BEHAVIORS})
        per_behavior[rule.behavior].add(rule)

    def finish(self) -> CompiledRules:
        for per_behavior in self.index.values():
            for rule_index in per_behavior.values():
                rule_index.sort()
        return self

    def lookup(self, key: str, behavior: str) -> RuleIndex | None:
        per_behavior = self.index.get(key)
        return per_behavior[behavior] if per_behavior else None

    def merged(self, other: CompiledRules) -> CompiledRules:
        combined = CompiledRules()
        for rule in (*self.rules, *other.rules):
            combined.add(rule)
        return combined.finish()

    def __len__(self) -> int:
        return len(self.rules)


def _index_key(rule: Rule) -> str:
    if rule.is_mcp:
        parts = rule.tool_name.split("__")
        if len(parts) == 2 or (len(parts) == 3 and parts[2] in ("", "*")):
            return "mcp__" + parts[1]  # a whole-server rule
    return rule.tool_name


def compile_rule(text: object, behavior: object, source: object, expires_at: object = None) -> CompiledRule:
    """Compile one rule; raise RuleSyntaxError naming the problem."""
    if behavior not in BEHAVIORS:
        raise RuleSyntaxError(f"{text}: behavior must be allow, deny or ask, not {behavior!r}")
    if not isinstance(source, str) or source not in SOURCE_RANK:
        raise RuleSyntaxError(f"{text}: unknown source {source!r}; use one of {', '.join(SOURCES)}")
    parsed = parse_rule(text)
    parsed = Rule(canonical_rule_tool(parsed.tool_name), parsed.content)
    expiry = parse_expiry(expires_at, str(parsed))
    matcher = _matcher_for(parsed)
    return CompiledRule(parsed, behavior, source, expiry, **matcher)


def _matcher_for(rule: Rule) -> dict[str, Any]:
    content, name, text = rule.content, rule.tool_name, str(rule)
    if content is None:
        return {}
    if name == "Bash":
        return {"command": compile_command(content, text)}
    if name in PATH_FAMILY or (name in BUILTIN_TOOLS and BUILTIN_TOOLS[name].kind in ("read", "edit")):
        return {"path": compile_path(content, text)}
    if name == "WebFetch":
        return {"domain": compile_domain(content, text)}
    if rule.is_mcp:
        raise RuleSyntaxError(f"{text}: MCP rules take no parenthesised specifier")
    if name in _CONTENT_FIELDS:
        return {"command": compile_command(content, text)}
    return {}


def parse_expiry(value: object, rule_text: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise RuleSyntaxError(f"{rule_text}: expires_at {value!r} is not ISO 8601") from None
    else:
        raise RuleSyntaxError(f"{rule_text}: expires_at must be an ISO 8601 string")
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def compile_rules(items: Iterable[Any]) -> CompiledRules:
    """Compile rule items or whole settings documents; raise RuleSyntaxError on the first bad one."""
    compiled = CompiledRules()
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise RuleSyntaxError("rules must be a list of rule items or settings documents")
    for item in items:
        for rule in _compile_item(item):
            compiled.add(rule)
    return compiled.finish()


def _compile_item(item: object) -> list[CompiledRule]:
    if not isinstance(item, Mapping):
        raise RuleSyntaxError(f"rule item must be an object, got {type(item).__name__}")
    if "permissions" in item:
        from policy.settings import settings_items  # settings imports this module

        return [_compile_item(sub)[0] for sub in settings_items(item, item.get("source"))]
    if "rule" not in item:
        raise RuleSyntaxError("rule item needs a 'rule' key (or a 'permissions' object)")
    return [compile_rule(item.get("rule"), item.get("behavior"), item.get("source"), item.get("expires_at"))]
