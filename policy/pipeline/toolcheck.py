"""Layer 1c: each tool's own permission check (Bash analysis, working directories)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policy.decision import mode_reason, simple_reason
from policy.paths import (
    NormalPath,
    could_be_protected,
    critical_removal,
    device_reason,
    inside_any,
    is_inside,
    protected_reason,
)
from policy.pipeline.context import CallContext
from policy.pipeline.unasked import accept_edits_line, read_only_line
from policy.shell import ShellAnalysis
from policy.urls import private_reason


@dataclass(frozen=True)
class ToolCheck:
    """``final`` answers hold even in bypassPermissions (deny, safety-check ask)."""

    behavior: str  # allow | deny | ask | passthrough
    reason: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    final: bool = False


PASSTHROUGH = ToolCheck("passthrough")


def check_tool(ctx: CallContext) -> ToolCheck:
    kind = ctx.spec.kind
    if kind == "bash":
        return _check_bash(ctx)
    if kind == "edit":
        return _check_edit(ctx)
    if kind == "read":
        return _check_read(ctx)
    if kind == "web":
        return _check_web(ctx)
    if kind == "other" and ctx.spec.read_only:
        # TodoWrite, BashOutput, ExitPlanMode: Claude Code never prompts for these.
        return ToolCheck("allow", simple_reason("other", f"{ctx.spec.name} needs no permission"))
    return PASSTHROUGH


def _check_bash(ctx: CallContext) -> ToolCheck:
    analysis = ctx.analysis
    if analysis is None:
        return PASSTHROUGH
    critical = _critical_removal(analysis, ctx)
    if critical:
        # Claude Code 2.1.332 asks for these in every mode, whatever the rules say.
        return ToolCheck(
            "ask",
            simple_reason("safetyCheck", critical),
            f"This command needs approval: {critical}. It removes a critical directory.",
            final=True,
        )
    protected = _protected_write(analysis, ctx)
    if protected:
        # As for Write and Edit: a safety check no rule, mode or classifier answers.
        return ToolCheck(
            "ask",
            simple_reason("safetyCheck", protected),
            f"This command needs approval: {protected}.",
            final=True,
        )
    if read_only_line(analysis, ctx):
        # As Claude Code 2.1.332 does in every mode (deny and ask rules have had their say).
        return ToolCheck("allow", simple_reason("workingDirectory", "read-only command inside the working directories"))
    if ctx.mode == "acceptEdits" and accept_edits_line(analysis, ctx):
        return ToolCheck("allow", mode_reason("acceptEdits", "file commands inside the working directories"))
    if analysis.can_auto_allow:
        return PASSTHROUGH
    detail = "; ".join(analysis.blockers) or "the command is empty"
    return ToolCheck(
        "ask",
        simple_reason("other", f"shell analysis: {detail}"),
        f"This command needs approval because {detail}.",
    )


def _critical_removal(analysis: ShellAnalysis, ctx: CallContext) -> str | None:
    """``rm -rf ~``, ``sudo rm -r /usr``, ``cd / && rm -rf *``, ``rm -rf ..`` and their kin."""
    if not analysis.removals:
        return None
    home = ctx.resolver.normalise(ctx.home) if ctx.home else None
    cwd = ctx.resolver.normalise(ctx.cwd) if ctx.cwd else None
    for name, word in analysis.removals:
        for spelling in analysis.relative_spellings(word):
            reason = critical_removal(ctx.resolver.normalise(spelling), home, cwd)
            if reason:
                return f"Dangerous {name} operation on {reason}"
    return None


def _protected_write(analysis: ShellAnalysis, ctx: CallContext) -> str | None:
    for target, unresolved in analysis.write_targets:
        relative = not target.startswith(("/", "~"))
        if unresolved or (relative and analysis.unknown_directory):
            if could_be_protected(target, ctx.resolver) or (relative and analysis.unknown_directory):
                return f"it writes to {target}, which is only known when it runs and could be a protected path"
            continue
        # ``cd .git && echo x > config`` writes .git/config: every directory the line
        # moves to is a place the relative target may be in.
        for spelling in analysis.relative_spellings(target):
            reason = protected_reason(ctx.resolver.normalise(spelling))
            if reason:
                return f"it writes to {target}: {reason}"
    return None


def _check_edit(ctx: CallContext) -> ToolCheck:
    for path in ctx.paths:
        protected = protected_reason(path)
        if protected:
            return ToolCheck(
                "ask",
                simple_reason("safetyCheck", protected),
                f"Writing to {path.lexical} needs approval: {protected}.",
                final=True,
            )
    escape = symlink_escape(ctx)
    if escape is not None:
        target = f"{escape.lexical} resolves through a symlink to {escape.real}"
        detail = f"{target}, which is outside the working directories"
        return ToolCheck("ask", simple_reason("workingDirectory", detail), f"{detail}.")
    if not all(inside_any(p, ctx.roots) for p in ctx.paths):
        outside = next(p for p in ctx.paths if not inside_any(p, ctx.roots))
        return ToolCheck(
            "ask",
            simple_reason("workingDirectory", f"{outside.lexical} is outside the working directories"),
            f"{outside.lexical} is outside the working directories.",
        )
    if ctx.mode == "acceptEdits":
        return ToolCheck("allow", mode_reason("acceptEdits", "edit inside the working directories"))
    return PASSTHROUGH


def _check_read(ctx: CallContext) -> ToolCheck:
    for path in ctx.paths:
        device = device_reason(path)
        if device:
            # Reading /dev/zero or /dev/random never ends; Claude Code refuses these.
            return ToolCheck(
                "deny",
                simple_reason("safetyCheck", device),
                f"Cannot read {path.lexical}: {device}.",
                final=True,
            )
    if all(inside_any(p, ctx.roots) for p in ctx.paths):
        return ToolCheck("allow", simple_reason("workingDirectory", "read inside the working directories"))
    outside = next(p for p in ctx.paths if not inside_any(p, ctx.roots))
    return ToolCheck(
        "ask",
        simple_reason("workingDirectory", f"{outside.lexical} is outside the working directories"),
        f"Reading {outside.lexical} needs approval: it is outside the working directories.",
    )


def _check_web(ctx: CallContext) -> ToolCheck:
    reason = private_reason(ctx.web_url) if ctx.web_url is not None else None
    if reason is None:
        return PASSTHROUGH
    # Final: a WebFetch allow rule (or a mode) names a domain, and must not open the
    # local network to whoever controls where that name or a redirect points.
    return ToolCheck(
        "ask",
        simple_reason("safetyCheck", reason),
        f"Fetching {ctx.tool_input.get('url', '')} needs approval: {reason}.",
        final=True,
    )


def symlink_escape(ctx: CallContext) -> NormalPath | None:
    """A file the call writes that lies in a working directory but resolves outside all of them.

    Claude Code 2.1.332 asks for such a write (an Edit, a redirect) under any allow rule,
    the bare ``Edit`` and ``Bash`` included; bypassPermissions still allows it.
    """
    if ctx.spec.kind == "edit":
        written = ctx.paths
    elif ctx.analysis is not None:
        analysis = ctx.analysis
        written = [
            ctx.resolver.normalise(spelling)
            for target, unresolved in analysis.write_targets
            if not unresolved
            for spelling in analysis.relative_spellings(target)
        ]
    else:
        return None
    for path in written:
        lexically_inside = any(is_inside(path.lexical, root) for root in ctx.roots)
        if path.known and lexically_inside and not inside_any(path, ctx.roots):
            return path
    return None


def edit_inside_working_dirs(ctx: CallContext) -> bool:
    """The acceptEdits fast path used by auto mode: a safe edit in a working directory."""
    return (
        ctx.spec.kind == "edit"
        and bool(ctx.paths)
        and all(inside_any(p, ctx.roots) and not protected_reason(p) for p in ctx.paths)
    )
