"""Resolving an ask (SPEC §4 step 6): dontAsk, auto, headless, or leave it to people."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.classifier import SAFE_TOOLS, classify_readonly
from policy.decision import classifier_reason, hook_reason, mode_reason, simple_reason
from policy.pipeline import hooks
from policy.pipeline.context import CallContext
from policy.pipeline.request import Request
from policy.pipeline.state import Run, Verdict
from policy.pipeline.toolcheck import edit_inside_working_dirs


def resolve_ask(verdict: Verdict, request: Request, ctx: CallContext, run: Run) -> Verdict:
    """Turn an ask into allow/deny where the mode or context says so; else keep it."""
    if request.mode == "dontAsk":
        run.step("resolveAsk", "deny", by="dontAsk")
        return Verdict(
            "deny",
            mode_reason("dontAsk", "would need approval"),
            "Permission to use this tool was not granted in advance (dontAsk mode). " + verdict.message,
        )
    if request.mode == "auto" and not verdict.forced:
        resolved = _resolve_auto(request, ctx, run)
        if resolved is not None:
            return resolved
    if request.context == "headless":
        return _resolve_headless(verdict, request, run)
    run.step("resolveAsk", "ask", by=request.context)
    return verdict


def _resolve_auto(request: Request, ctx: CallContext, run: Run) -> Verdict | None:
    if edit_inside_working_dirs(ctx):
        run.step("resolveAsk", "allow", by="acceptEditsFastPath")
        return Verdict("allow", mode_reason("auto", "acceptEdits fast path: edit inside the working directories"))
    if ctx.spec.name in SAFE_TOOLS:
        run.step("resolveAsk", "allow", by="safeToolAllowlist")
        return Verdict("allow", mode_reason("auto", f"{ctx.spec.name} is on the safe-tool allowlist"))
    verdict = request.classifier_verdict or _builtin_verdict(request, ctx)
    name = str(verdict.get("name") or "classifier")
    behavior = verdict.get("behavior")
    detail = str(verdict.get("reason") or "")
    if behavior in ("allow", "deny"):
        run.step("resolveAsk", behavior, by="classifier", classifier=name)
        message = "" if behavior == "allow" else f"The {name} classifier blocked this action. {detail}".strip()
        return Verdict(behavior, classifier_reason(name, behavior, detail), message)
    run.step("resolveAsk", "noOpinion", by="classifier", classifier=name)
    return None


def _builtin_verdict(request: Request, ctx: CallContext) -> Mapping[str, Any]:
    return classify_readonly(
        ctx.spec.name,
        ctx.tool_input,
        cwd=ctx.cwd,
        additional_directories=ctx.additional_directories,
        home=ctx.home,
        facts=ctx.facts,
    )


def _resolve_headless(verdict: Verdict, request: Request, run: Run) -> Verdict:
    outcome = hooks.permission_request(request.permission_request_hooks)
    if outcome.behavior == "deny":
        run.step("resolveAsk", "deny", by="permissionRequestHook", hook=outcome.hook)
        return Verdict(
            "deny",
            hook_reason(outcome.hook, "PermissionRequest"),
            outcome.message or "A PermissionRequest hook denied this action.",
        )
    if outcome.behavior == "allow":
        run.step("resolveAsk", "allow", by="permissionRequestHook", hook=outcome.hook)
        if outcome.updated_input is not None:
            run.updated_input = outcome.updated_input
        return Verdict("allow", hook_reason(outcome.hook, "PermissionRequest"))
    run.step("resolveAsk", "deny", by="headless")
    return Verdict(
        "deny",
        simple_reason("headless", "no one can be asked in a headless session"),
        "This action needs approval, but the session is headless and no hook approved it. " + verdict.message,
    )
