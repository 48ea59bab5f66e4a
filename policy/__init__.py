"""Gatehouse's decision engine: pure Python, no Django, HTTP or Redis.

Data in (one proposed tool call), decision out (allow / deny / ask, a reason naming what
decided, and a trace of every layer passed).
"""

from policy.decision import Decision
from policy.pipeline import decide
from policy.rules import CompiledRules, Rule, RuleSyntaxError, compile_rules, parse_rule

__all__ = [
    "CompiledRules",
    "Decision",
    "Rule",
    "RuleSyntaxError",
    "compile_rules",
    "decide",
    "parse_rule",
]
