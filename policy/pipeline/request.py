"""Parse the ``decide`` input document into a typed request, with safe defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policy.facts import NO_FACTS, AgentFacts, FactsError, parse_facts

MODES = frozenset({"default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"})
CONTEXTS = frozenset({"interactive", "headless", "coordinator"})
# What happens to a tool the registry does not know (a newer CLI's): a person decides, or a deny.
UNKNOWN_TOOLS = frozenset({"ask", "deny"})


class RequestError(ValueError):
    """The request document itself is malformed (reported as a deny, never raised out)."""


@dataclass
class Request:
    """One proposed tool call and everything the engine may consult about it."""

    tool_name: str
    tool_input: Any
    cwd: str
    additional_directories: list[str]
    mode: str
    context: str
    home: str | None
    pre_tool_use_hooks: list[Any]
    permission_request_hooks: list[Any]
    rules: list[Any]
    session_id: str
    denial_state: dict[str, Any]
    classifier_verdict: Mapping[str, Any] | None
    plan_from_bypass: bool = False
    facts: AgentFacts = NO_FACTS
    # Project roots a team admin pinned for this agent: a cwd outside them never allows.
    pinned_roots: tuple[str, ...] = ()
    unknown_tools: str = "ask"
    extra: dict[str, Any] = field(default_factory=dict)


def _string(doc: Mapping[str, Any], key: str, default: str) -> str:
    value = doc.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise RequestError(f"{key} must be a string")
    return value


def _list(doc: Mapping[str, Any], key: str) -> list[Any]:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise RequestError(f"{key} must be a list")
    return value


def _home(doc: Mapping[str, Any], facts: AgentFacts) -> str | None:
    """The agent's home: reported in ``facts``, else the top-level ``home``, else unknown.

    Never the environment this engine runs in: that is the server's home, not the agent's.
    """
    if facts.home is not None:
        return facts.home
    return _string(doc, "home", "") or None


def _facts(doc: Mapping[str, Any]) -> AgentFacts:
    try:
        return parse_facts(doc.get("facts"))
    except FactsError as exc:
        raise RequestError(str(exc)) from exc


def parse_request(doc: object) -> Request:
    """Validate the envelope; tool_input is validated later against the tool's schema."""
    if not isinstance(doc, Mapping):
        raise RequestError("the request must be a JSON object")
    mode = _string(doc, "mode", "default")
    if mode not in MODES:
        raise RequestError(f"mode {mode!r} is not one of {', '.join(sorted(MODES))}")
    context = _string(doc, "context", "interactive")
    if context not in CONTEXTS:
        raise RequestError(f"context {context!r} is not one of {', '.join(sorted(CONTEXTS))}")
    unknown_tools = _string(doc, "unknown_tools", "ask")
    if unknown_tools not in UNKNOWN_TOOLS:
        raise RequestError(f"unknown_tools {unknown_tools!r} is not one of ask, deny")
    directories = _list(doc, "additional_directories")
    if not all(isinstance(d, str) for d in directories):
        raise RequestError("additional_directories must be a list of strings")
    denial_state = doc.get("denial_state") or {}
    verdict = doc.get("classifier_verdict")
    facts = _facts(doc)
    pinned = _list(doc, "pinned_roots")
    if not all(isinstance(root, str) and root.startswith("/") for root in pinned):
        raise RequestError("pinned_roots must be a list of absolute paths")
    return Request(
        tool_name=doc.get("tool_name"),  # type: ignore[arg-type]  # checked at lookup
        tool_input=doc.get("tool_input", {}),
        # No cwd means no working directory: every path is "outside" and asks.
        cwd=_string(doc, "cwd", ""),
        additional_directories=directories,
        mode=mode,
        context=context,
        home=_home(doc, facts),
        pre_tool_use_hooks=_list(doc, "pre_tool_use_hooks"),
        permission_request_hooks=_list(doc, "permission_request_hooks"),
        rules=_list(doc, "rules"),
        session_id=_string(doc, "session_id", ""),
        denial_state=denial_state if isinstance(denial_state, dict) else {},
        classifier_verdict=verdict if isinstance(verdict, Mapping) else None,
        plan_from_bypass=doc.get("plan_from_bypass") is True,
        facts=facts,
        pinned_roots=tuple(pinned),
        unknown_tools=unknown_tools,
    )
