"""Layers 1a to 3 of the pipeline: rules, the tool's own check, modes, allow rules."""

from __future__ import annotations

from policy.decision import hook_reason, mode_reason, rule_reason, simple_reason
from policy.pipeline.context import CallContext
from policy.pipeline.hooks import HookOutcome
from policy.pipeline.matching import find_rule
from policy.pipeline.request import Request
from policy.pipeline.state import Run, Verdict
from policy.pipeline.toolcheck import ToolCheck, check_tool
from policy.pipeline.unresolved import reserved_by_unresolved
from policy.rules.compiled import CompiledRule, CompiledRules


def _rule_verdict(rule: CompiledRule, ctx: CallContext) -> Verdict:
    if rule.behavior == "deny":
        message = f"Permission to use {ctx.spec.name} has been denied by the rule {rule.text} ({rule.source})."
    elif rule.behavior == "ask":
        message = f"The rule {rule.text} ({rule.source}) requires approval for this action."
    else:
        message = ""
    # An explicit ask rule means "a person decides": auto mode's classifier and fast
    # paths must not answer it.
    forced = rule.behavior == "ask"
    return Verdict(rule.behavior, rule_reason(rule.describe()), message, forced=forced)


def deny_and_ask_rules(rules: CompiledRules, ctx: CallContext, run: Run) -> Verdict | None:
    """Layers 1a and 1b: a deny rule from any source wins, then an ask rule.

    After each, a word only known at run time that could match such a rule reserves
    the call for a person.
    """
    for behavior, layer in (("deny", "denyRules"), ("ask", "askRules")):
        rule = find_rule(rules, behavior, ctx)
        if rule is not None:
            run.step(layer, behavior, rule=rule.text, source=rule.source)
            return _rule_verdict(rule, ctx)
        run.step(layer, "noMatch")
        reserved = _unresolved_verdict(rules, behavior, ctx, run)
        if reserved is not None:
            return reserved
    return None


def _unresolved_verdict(rules: CompiledRules, behavior: str, ctx: CallContext, run: Run) -> Verdict | None:
    found = reserved_by_unresolved(rules, behavior, ctx)
    if found is None:
        return None
    rule, word = found
    detail = f"{word} is only known when the command runs and could match the {behavior} rule {rule.text}"
    run.step("unresolvedWords", "ask", word=word, rule=rule.text, source=rule.source)
    return Verdict("ask", simple_reason("safetyCheck", detail), f"This command needs approval: {detail}.", forced=True)


def hook_forced(outcome: HookOutcome, rules: CompiledRules, ctx: CallContext, run: Run) -> Verdict:
    """A hook allow/ask still loses to deny rules (and an allow to ask rules)."""
    denied = find_rule(rules, "deny", ctx)
    if denied is not None:
        run.step("denyRules", "deny", rule=denied.text, source=denied.source)
        return _rule_verdict(denied, ctx)
    run.step("denyRules", "noMatch")
    hook_message = outcome.message or f"Hook {outcome.hook} asked for approval."
    if outcome.behavior == "ask":
        return Verdict("ask", hook_reason(outcome.hook, "ask"), hook_message, forced=True)
    reserved = _unresolved_verdict(rules, "deny", ctx, run)
    if reserved is not None:
        return reserved
    asked = find_rule(rules, "ask", ctx)
    if asked is not None:
        run.step("askRules", "ask", rule=asked.text, source=asked.source)
        return _rule_verdict(asked, ctx)
    run.step("askRules", "noMatch")
    reserved = _unresolved_verdict(rules, "ask", ctx, run)
    if reserved is not None:
        return reserved
    check = check_tool(ctx)
    if check.final:
        run.step("toolCheck", check.behavior, **check.reason)
        return Verdict(check.behavior, check.reason, check.message, forced=True)  # type: ignore[arg-type]
    return Verdict("allow", hook_reason(outcome.hook, "allow"), outcome.message)


def tool_and_modes(
    request: Request,
    rules: CompiledRules,
    ctx: CallContext,
    run: Run,
    validation_ask: str = "",
) -> Verdict:
    """Layers 1c, plan mode, 2a (bypass), 2b (allow rules) and 3 (ask)."""
    recorded = recorded_check(ctx, run)
    if recorded is not None:
        return recorded
    check = check_tool(ctx)
    if validation_ask and check.behavior == "passthrough":
        # A semantic check that answered "ask" behaves like the tool's own ask.
        check = ToolCheck("ask", simple_reason("other", f"validation: {validation_ask}"), validation_ask)
    run.step("toolCheck", check.behavior, **check.reason)
    if check.behavior in ("deny", "allow") or check.final:
        return Verdict(check.behavior, check.reason, check.message, forced=check.final)  # type: ignore[arg-type]
    if request.mode == "plan" and ctx.spec.kind == "edit":
        # Claude Code 2.1.332 asks a person for every edit while planning, allow rules or not.
        run.step("mode", "ask", mode="plan")
        return Verdict(
            "ask",
            mode_reason("plan", "edits ask while planning"),
            "Plan mode is active: this edit needs approval (present the plan with ExitPlanMode first).",
        )
    if request.mode == "bypassPermissions" or (request.mode == "plan" and request.plan_from_bypass):
        run.step("mode", "allow", mode=request.mode)
        return Verdict("allow", mode_reason("bypassPermissions"))
    run.step("mode", "noDecision", mode=request.mode)
    if not ctx.spec.allow_rules_answer:
        # Claude Code 2.1.332 asks for these under an allow rule too (a plan to approve, questions).
        run.step("allowRules", "skipped", tool=ctx.spec.name)
        detail = f"{ctx.spec.name} is asked even under an allow rule"
        return Verdict("ask", simple_reason("other", detail), f"{ctx.spec.name} needs approval from a person.")
    allowed = find_rule(rules, "allow", ctx)
    if allowed is not None:
        run.step("allowRules", "allow", rule=allowed.text, source=allowed.source)
        return _rule_verdict(allowed, ctx)
    run.step("allowRules", "noMatch")
    if check.behavior == "ask":
        return Verdict("ask", check.reason, check.message)
    return Verdict(
        "ask",
        simple_reason("other", "no rule allows this call"),
        f"{ctx.spec.name} needs approval: no rule allows this call.",
    )


def recorded_check(ctx: CallContext, run: Run) -> Verdict | None:
    """What Claude Code 2.1.332 does with the tool whatever its input (the tool recording).

    - a tool that needs no permission runs without asking, in every mode (after deny and
      ask rules, which the caller has applied);
    - a tool whose own check refuses every call is denied, by no rule or mode undone.
    """
    if not ctx.spec.needs_permission:
        run.step("toolCheck", "allow", detail="no permission needed")
        return Verdict("allow", simple_reason("other", "no permission needed"))
    if ctx.spec.refusal:
        run.step("toolCheck", "deny", detail=ctx.spec.refusal)
        return Verdict("deny", simple_reason("other", ctx.spec.refusal), ctx.spec.refusal, forced=True)
    return None


def unknown_tool(request: Request, rules: CompiledRules, ctx: CallContext, run: Run) -> Verdict:
    """A tool no registry entry knows (a newer CLI's): its rules, else the team's choice.

    Deny and ask rules naming it apply, then an allow rule naming it (a person wrote it).
    Otherwise a person decides: a reserved ask no mode, hook or classifier answers, or a
    deny where the team set ``unknown_tools`` to deny.
    """
    ruled = deny_and_ask_rules(rules, ctx, run)
    if ruled is not None:
        return ruled
    allowed = find_rule(rules, "allow", ctx)
    if allowed is not None:
        run.step("allowRules", "allow", rule=allowed.text, source=allowed.source)
        return _rule_verdict(allowed, ctx)
    run.step("allowRules", "noMatch")
    name = ctx.spec.name
    if request.unknown_tools == "deny":
        run.step("unknownTool", "deny", setting="deny")
        message = f"{name} is a tool Gatehouse does not know, and this team denies those."
        return Verdict("deny", simple_reason("other", "unknown tool: the team denies unknown tools"), message)
    run.step("unknownTool", "ask", setting="ask")
    detail = "unknown tool: a person decides"
    return Verdict(
        "ask",
        simple_reason("other", detail),
        f"{name} is a tool Gatehouse does not know: a person decides.",
        forced=True,
    )
