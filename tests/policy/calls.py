"""Shared request builders and the standard rule set the table tests run against."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent import facts
from policy import Decision, decide

CWD = "/srv/project"
HOME = "/home/alice"

STANDARD_RULES: list[dict[str, Any]] = [
    {
        "source": "projectSettings",
        "permissions": {
            "allow": [
                "Bash(git status:*)",
                "Bash(git log *)",
                "Bash(npm run test:*)",
                "Bash(ls:*)",
                "Bash(echo:*)",
                "Bash(cat:*)",
                "Bash(pytest)",
                "Edit(src/**)",
                "Read(~/notes/**)",
                "WebFetch(domain:docs.python.org)",
                "mcp__github",
                "Task(Explore)",
            ],
            "ask": ["Bash(git push:*)", "Bash(npm publish:*)", "Edit(src/secrets/**)", "WebFetch(domain:pypi.org)"],
            "deny": [
                "Bash(curl:*)",
                "Bash(git push --force:*)",
                "Edit(//etc/**)",
                "WebFetch(domain:*.evil.com)",
                "mcp__evil",
                "Task(General)",
            ],
        },
    },
    {
        "source": "policySettings",
        "permissions": {
            "deny": ["Bash(rm:*)", "Read(~/.ssh/**)", "Read(.env)", "Bash(sudo:*)"],
        },
    },
]


# The hook gathers facts within 50 ms and past that reports them truncated, so the engine
# asks about what it was not told. On a test machine under a full run that budget ran out
# at random; the tests read this machine's disk without it.
GATHER_BUDGET_SECONDS = 60.0


def gather(
    tool: str, tool_input: dict[str, Any], cwd: str, additional_directories: Iterable[str] = (), home: str | None = None
) -> dict[str, Any]:
    """What a hook on the agent's machine would report (here: this machine's disk)."""
    return facts.gather(tool, tool_input, cwd, additional_directories, home, budget=GATHER_BUDGET_SECONDS)


def request(tool: str, tool_input: dict[str, Any], **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "tool_name": tool,
        "tool_input": tool_input,
        "cwd": CWD,
        "home": HOME,
        "mode": "default",
        "context": "interactive",
        "rules": STANDARD_RULES,
    }
    doc.update(extra)
    if "facts" not in doc:
        # What a hook on the agent's machine would report (here: this machine's disk).
        doc["facts"] = gather(tool, tool_input, doc["cwd"], doc.get("additional_directories") or [], doc["home"])
    return doc


def bash(command: str, **extra: Any) -> Decision:
    return decide(request("Bash", {"command": command}, **extra))


def layer_results(decision: Decision) -> list[tuple[str, str]]:
    return [(step["layer"], step["result"]) for step in decision.trace]
