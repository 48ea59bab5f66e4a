"""Claude Code permission rules: parsing, compiling and the source order."""

from policy.rules.compiled import (
    BEHAVIORS,
    SOURCE_RANK,
    SOURCES,
    CompiledRule,
    CompiledRules,
    compile_rule,
    compile_rules,
)
from policy.rules.parse import Rule, RuleSyntaxError, parse_rule

__all__ = [
    "BEHAVIORS",
    "SOURCES",
    "SOURCE_RANK",
    "CompiledRule",
    "CompiledRules",
    "Rule",
    "RuleSyntaxError",
    "compile_rule",
    "compile_rules",
    "parse_rule",
]
