"""Missing agent facts: an allow that rests on something the agent did not report asks.

A curl hook, an older hook or a hand-written client sends no facts. The engine then
cannot know where a path leads (a symlink may leave the allowed tree) or where ``~`` is,
so every allow whose outcome could change with that fact becomes a person's question.
Nothing is denied for it: a file the server cannot see is not a missing file.
"""

from __future__ import annotations

from policy.decision import simple_reason
from policy.paths import UNREPORTED, inside_any, names_home, unreported
from policy.pipeline.context import CallContext
from policy.pipeline.state import Run, Verdict
from policy.rules.compiled import CompiledRules

_PATH_BEHAVIORS = ("deny", "ask")


def missing_fact(ctx: CallContext, rules: CompiledRules) -> str | None:
    """What an allow of this call would rest on that the agent did not report, or None."""
    pinned = _outside_pinned_roots(ctx)
    if pinned is not None:
        return pinned
    kind = ctx.spec.kind
    if kind in ("read", "edit"):
        return _missing_for_paths(ctx, rules)
    if kind == "bash" and ctx.analysis is not None:
        return _missing_for_command(ctx, rules)
    return None


def _outside_pinned_roots(ctx: CallContext) -> str | None:
    """A team admin pinned where this agent works: a working directory elsewhere asks."""
    if not ctx.pinned_roots:
        return None
    for entry in (ctx.cwd, *ctx.additional_directories):
        path = ctx.resolver.normalise(entry or "/")
        if not path.known:
            return unreported(path, ctx.home)
        if not inside_any(path, ctx.pinned_roots):
            return f"the working directory {path.lexical} is outside the agent's pinned project roots"
    return None


def _missing_for_paths(ctx: CallContext, rules: CompiledRules) -> str | None:
    if ctx.home is None and (_home_rules(rules, ctx.rule_keys) or any(names_home(p.lexical) for p in ctx.paths)):
        return f"{UNREPORTED} its home directory, which a ~ rule or path needs"
    for path in ctx.paths:
        if not path.known:
            return unreported(path, ctx.home)
    return None


def _missing_for_command(ctx: CallContext, rules: CompiledRules) -> str | None:
    assert ctx.analysis is not None
    for blocker in ctx.analysis.blockers:
        if UNREPORTED in blocker:
            return blocker.split(": ", 1)[-1]
    if not _path_rules(rules, ("Read", "Edit")):
        return None
    # Read and Edit deny rules apply to every operand (``cat notes`` where notes is a
    # link to a key): an operand that may be a link the agent did not resolve matters.
    for path in ctx.shell_operand_paths():
        if not path.known:
            return unreported(path, ctx.home)
    if ctx.home is None and ctx.shell_operand_paths() and _home_rules(rules, ("Read", "Edit")):
        return f"{UNREPORTED} its home directory, which a ~ rule needs"
    return None


def _path_rules(rules: CompiledRules, keys: tuple[str, ...]) -> bool:
    for key in keys:
        for behavior in _PATH_BEHAVIORS:
            index = rules.lookup(key, behavior)
            if index is not None and index.path_buckets:
                return True
    return False


def _home_rules(rules: CompiledRules, keys: tuple[str, ...]) -> bool:
    """Any ``~`` deny or ask rule for these tools: unknown home means it might match."""
    for key in keys:
        for behavior in _PATH_BEHAVIORS:
            index = rules.lookup(key, behavior)
            if index is not None and any(root == "home" for root, _ in index.path_buckets):
                return True
    return False


def unless_unreported(verdict: Verdict, ctx: CallContext, rules: CompiledRules, run: Run) -> Verdict:
    """Turn an allow that rests on a missing fact into an ask a person answers.

    An ask stays an ask, and says what was missing so the person knows it too.
    """
    if verdict.behavior == "deny":
        return verdict
    missing = missing_fact(ctx, rules)
    if missing is None:
        return verdict
    if verdict.behavior == "ask":
        if UNREPORTED not in verdict.message:
            verdict.message = f"{verdict.message} Note: {missing}.".strip()
        return verdict
    run.step("agentFacts", "ask", missing=missing)
    return Verdict(
        "ask",
        simple_reason("other", missing),
        f"{ctx.spec.name} needs approval: {missing}, so it cannot be allowed automatically.",
        forced=True,
    )
