"""``decide``: run one proposed tool call through the whole pipeline (SPEC §4)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from policy import denials
from policy.decision import Decision, hook_reason, simple_reason
from policy.pipeline import hooks
from policy.pipeline.context import CallContext, build_context
from policy.pipeline.layers import deny_and_ask_rules, hook_forced, tool_and_modes, unknown_tool
from policy.pipeline.request import Request, RequestError, parse_request
from policy.pipeline.resolve import resolve_ask
from policy.pipeline.state import Run, Verdict
from policy.pipeline.unreported import unless_unreported
from policy.rules.compiled import CompiledRules, compile_rules
from policy.rules.parse import RuleSyntaxError
from policy.tools import ToolSpec, lookup, unknown_spec
from policy.tools.validation import Disk, validate


def decide(doc: Mapping[str, Any], *, rules: CompiledRules | None = None, now: datetime | None = None) -> Decision:
    """Decide allow / deny / ask for one call; never raises (errors become denies)."""
    run = Run()
    try:
        return _decide(doc, rules, now or datetime.now(UTC), run)
    except Exception as exc:
        run.step("internal", "error", error=type(exc).__name__)
        return run.decision(
            Verdict(
                "deny",
                simple_reason("other", f"internal error: {type(exc).__name__}"),
                "The permission engine failed on this request, so it was denied.",
            )
        )


def _fail(run: Run, layer: str, detail: str, message: str) -> Decision:
    run.step(layer, "deny", detail=detail)
    return run.decision(Verdict("deny", simple_reason("other", detail), message))


def _decide(doc: Mapping[str, Any], given: CompiledRules | None, now: datetime, run: Run) -> Decision:
    try:
        request = parse_request(doc)
    except RequestError as exc:
        return _fail(run, "request", "invalid request", f"Invalid permission request: {exc}")
    if not isinstance(request.tool_name, str) or not request.tool_name:
        return _fail(run, "request", "invalid request", "Invalid permission request: tool_name must be a tool's name")
    found = lookup(request.tool_name)
    # A tool no entry knows (a newer CLI's) is not refused for that: a person decides.
    spec = found.spec or unknown_spec(request.tool_name)
    run.tool_name = spec.name
    run.tool_input = request.tool_input if isinstance(request.tool_input, dict) else {}
    run.warnings.extend(found.warnings)
    run.step("toolLookup", "found" if spec.known else "unknown", tool=spec.name)
    try:
        rules = _effective_rules(request.rules, given)
    except RuleSyntaxError as exc:
        return _fail(run, "rules", "invalid rule", f"Invalid permission rule: {exc}")
    return _with_valid_input(request, spec, rules, now, run)


def _with_valid_input(request: Request, spec: ToolSpec, rules: CompiledRules, now: datetime, run: Run) -> Decision:
    disk = Disk(request.cwd, request.home, request.facts)
    checked = validate(spec, request.tool_input, disk)
    if not checked.ok:
        return _fail(run, "validation", "validation", checked.message)
    run.step("validation", "ask" if checked.ask else "ok")
    tool_input = checked.tool_input
    outcome = hooks.pre_tool_use(request.pre_tool_use_hooks)
    run.warnings.extend(outcome.warnings)
    if outcome.behavior == "deny":
        run.step("hooks", "deny", hook=outcome.hook)
        return _finish(
            request,
            None,
            Verdict(
                "deny",
                hook_reason(outcome.hook, "deny"),
                outcome.message or f"Hook {outcome.hook} denied this action.",
            ),
            run,
        )
    if outcome.updated_input is not None:
        rechecked = validate(spec, outcome.updated_input, disk)
        if not rechecked.ok:
            return _fail(run, "hooks", "validation", rechecked.message)
        tool_input = rechecked.tool_input
        run.updated_input = tool_input
    run.step(
        "hooks",
        outcome.behavior or "noDecision",
        hook=outcome.hook or None,
        updatedInput=outcome.updated_input is not None,
    )
    run.tool_input = tool_input
    ctx = build_context(
        spec,
        tool_input,
        cwd=request.cwd,
        home=request.home,
        mode=request.mode,
        additional=tuple(request.additional_directories),
        now=now,
        facts=request.facts,
        pinned_roots=request.pinned_roots,
    )
    original = None
    if outcome.updated_input is not None and outcome.updated_input != checked.tool_input:
        original = _original_input_rules(request, spec, checked.tool_input, rules, now, run)
        if original is not None and original.behavior == "deny":
            return _finish(request, ctx, original, run)
    if not spec.known:
        verdict = unknown_tool(request, rules, ctx, run)
    elif outcome.behavior in ("allow", "ask"):
        verdict = hook_forced(outcome, rules, ctx, run)
    else:
        verdict = deny_and_ask_rules(rules, ctx, run) or tool_and_modes(
            request, rules, ctx, run, checked.message if checked.ask else ""
        )
    if original is not None and verdict.behavior == "allow":
        verdict = original  # an ask rule matched the input as the agent sent it
    verdict = unless_unreported(verdict, ctx, rules, run)
    if verdict.behavior == "ask":
        # Auto mode may allow an ask: not one that rests on what the agent did not say.
        resolved = resolve_ask(verdict, request, ctx, run)
        gated = unless_unreported(resolved, ctx, rules, run)
        # A gated allow is now a forced ask: auto mode passes it on to a person.
        verdict = resolve_ask(gated, request, ctx, run) if gated is not resolved else resolved
    return _finish(request, ctx, verdict, run)


def _original_input_rules(
    request: Request, spec: ToolSpec, tool_input: dict[str, Any], rules: CompiledRules, now: datetime, run: Run
) -> Verdict | None:
    """Deny and ask rules on the input as sent, before a reported hook's `updatedInput`.

    An agent reports its own hooks' outputs: a rewritten input must not hide the real
    one from deny and ask rules (`rm -rf ~` reported as rewritten to `ls`).
    """
    original_ctx = build_context(
        spec,
        tool_input,
        cwd=request.cwd,
        home=request.home,
        mode=request.mode,
        additional=tuple(request.additional_directories),
        now=now,
        facts=request.facts,
        pinned_roots=request.pinned_roots,
    )
    run.step("originalInput", "check")
    return deny_and_ask_rules(rules, original_ctx, run)


def _finish(request: Request, ctx: CallContext | None, verdict: Verdict, run: Run) -> Decision:
    """Attach approver hints and denial tracking to the verdict."""
    decision = run.decision(verdict)
    analysis = ctx.analysis if ctx else None
    if analysis is not None:
        decision.destructive_warning = analysis.destructive_warning
        decision.suggested_rules = list(analysis.suggested_rules)
        if analysis.destructive_warning:
            decision.warnings.append(analysis.destructive_warning)
    elif ctx is not None and verdict.behavior != "allow":
        decision.suggested_rules = _suggest_for(ctx)
    key = denials.pattern_key(run.tool_name, analysis.suggested_rule if analysis else None)
    decision.denial_state = denials.record(request.denial_state, request.session_id, key, verdict.behavior)
    hint = denials.guidance(decision.denial_state)
    if hint and verdict.behavior == "deny":
        decision.message = f"{decision.message} {hint}".strip()
        run.step("denialTracking", "guidance", count=decision.denial_state["count"])
        decision.trace = list(run.trace)
    return decision


def _suggest_for(ctx: CallContext) -> list[str]:
    if ctx.spec.kind == "web" and ctx.host:
        return [f"WebFetch(domain:{ctx.host})"]
    if ctx.spec.kind == "mcp":
        return [ctx.spec.name]
    if ctx.spec.kind in ("edit", "read") and ctx.paths:
        family = "Edit" if ctx.spec.kind == "edit" else "Read"
        return [f"{family}(//{ctx.paths[0].lexical.lstrip('/')})"]
    return [ctx.spec.name]


def _effective_rules(items: list[Any], given: CompiledRules | None) -> CompiledRules:
    base = given if given is not None else CompiledRules()
    if not items:
        return base
    from_doc = _compile_cached(json.dumps(items, sort_keys=True, default=str))
    return base.merged(from_doc) if len(base) else from_doc


@functools.lru_cache(maxsize=64)
def _compile_cached(serialised: str) -> CompiledRules:
    # The CLI and the tests send the same rule lists over and over; compile each once.
    return compile_rules(json.loads(serialised))
