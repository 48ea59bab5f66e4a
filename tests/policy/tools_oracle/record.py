"""Record Claude Code's tools and which of them it asks about, for the tool registry.

    scripts/test-services.sh .venv/bin/python -m tests.policy.tools_oracle.record

starts the real CLI (``GATEHOUSE_CLAUDE_BIN``, else the one `make test` installs) once per
way of offering tools (``cli.OFFERS``: the default set, the default set with tool search
off so deferred tools come with their schemas, the environment flags that add tools, an
MCP server, tools only named with ``--tools``) and keeps each tool's ``input_schema`` as
the CLI sent it to the API. Then each tool is called with the inputs of ``probes`` in
default mode with no rules, and again under an allow, a deny and an ask rule naming it,
each call in its own CLI process and temporary directory. A tool needs permission when
Claude Code asked (``can_use_tool``) for any of its probes. Names Gatehouse or older
CLIs used (``probes.OLD_NAMES``) are tried too: still accepted, or no such tool.

It rewrites ``policy/tools/claude-code-<version>-tools.json`` (about two minutes on four
cores); ``--only NAME …`` probes just those tools and prints them as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from tests.e2e.claude_code.hookrun import ROOT as REPO
from tests.fakes.anthropic_stream import ScriptedToolUse
from tests.policy.tools_oracle import cli
from tests.policy.tools_oracle.probes import MORE_RULES, OLD_NAMES, Probe, probes

RECORD_COMMAND = "scripts/test-services.sh .venv/bin/python -m tests.policy.tools_oracle.record"
RULES = ("allow", "deny", "ask")
NO_SUCH_TOOL = "<tool_use_error>Error: No such tool available: {name}"
Item = TypeVar("Item")
Result = TypeVar("Result")


def recording_path(version: str) -> Path:
    return REPO / "policy" / "tools" / f"claude-code-{version}-tools.json"


def in_parallel(work: Callable[[Item], Result], items: list[Item], jobs: int) -> list[Result]:
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(work, items))


def catalogue(jobs: int) -> dict[str, dict[str, Any]]:
    """Every tool some offer shows: where it is first offered, and its schema as the first
    offer that sends one (``called_with``, where its probes run) has it."""
    runs = in_parallel(cli.run, list(cli.OFFERS), jobs)
    tools: dict[str, dict[str, Any]] = {}
    for offer, run in zip(cli.OFFERS, runs, strict=True):
        for name in run.deferred():
            tools.setdefault(name, {"offered": offer.name, "deferred": True})
        for name, tool in run.tools().items():
            if name.startswith("mcp__"):
                continue  # the MCP server's own tool, not Claude Code's
            entry = tools.setdefault(name, {"offered": offer.name, "deferred": False})
            if "input_schema" not in entry:
                entry.update(input_schema=tool.get("input_schema") or {}, called_with=offer.name)
    return tools


def _offer(name: str) -> cli.Offer:
    return next(offer for offer in cli.OFFERS if offer.name == name)


def outcome(offer: cli.Offer, name: str, probe: Probe, rules: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Claude Code's outcome for the probe's call (after the calls it needs made first)."""
    steps = [cli.Step(ScriptedToolUse(tool, tool_input)) for tool, tool_input in probe.before]
    steps.append(cli.Step(ScriptedToolUse(name, probe.input), probe.takes))
    run = cli.run(offer, steps, {"permissions": rules} if rules else None)
    found = run.outcomes.get(steps[-1].call.id)
    if found is None:
        raise RuntimeError(f"{name}: no outcome (stderr: {run.stderr[-2000:]})")
    if rules and "deny" in rules and found.get("message", "").startswith(NO_SUCH_TOOL.format(name=name) + "."):
        # A deny rule naming the whole tool takes it out of the session: the call is refused.
        return {"behavior": "deny", "reason_type": "rule", "message": found["message"]}
    return found


def probe_tool(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """One tool's probes without rules, then under rules naming it (on the probe that asked, if one did)."""
    offer = _offer(entry["called_with"])
    tried = probes(name, entry["input_schema"])
    plain = [{**probe.as_json(), "claude": outcome(offer, name, probe)} for probe in tried]
    asked = next((i for i, p in enumerate(plain) if p["claude"]["behavior"] == "ask"), 0)
    checks = [(asked, behavior, name) for behavior in RULES] + MORE_RULES.get(name, [])
    ruled = [
        {
            "probe": index,
            "behavior": behavior,
            "rule": rule,
            "claude": outcome(offer, name, tried[index], {behavior: [rule]}),
        }
        for index, behavior, rule in checks
    ]
    return {"probes": plain, "rules": ruled}


def summary(name: str, probed: dict[str, Any]) -> dict[str, Any]:
    """Whether Claude Code asks for the tool, read off its probes."""
    outcomes = [p["claude"] for p in probed["probes"]]
    if all(o.get("message", "").startswith(NO_SUCH_TOOL.format(name=name)) for o in outcomes):
        return {"callable": False, "needs_permission": None}  # listed, but not a tool one can call
    if not any(o["behavior"] in ("allow", "ask", "deny") for o in outcomes):
        raise RuntimeError(f"{name}: every probe failed before the permission check; fix its probe: {outcomes}")
    found: dict[str, Any] = {"callable": True, "needs_permission": any(o["behavior"] == "ask" for o in outcomes)}
    refused = [o for o in outcomes if o["behavior"] == "deny"]
    if refused and len(refused) == len(outcomes):
        # The tool's own check refuses it whatever the input: it never runs.
        found.update(needs_permission=True, refused=refused[0].get("reason") or refused[0].get("message"))
    return found


def old_name(name: str, target: str, probe: Probe) -> dict[str, Any]:
    found = outcome(_offer("default, tool search off"), name, probe)
    accepted = not found.get("message", "").startswith(NO_SUCH_TOOL.format(name=name))
    return {"accepted": accepted, "as": target if accepted else None, "claude": found, **probe.as_json()}


def record(jobs: int, only: list[str] | None = None) -> dict[str, Any]:
    tools = catalogue(jobs)
    names = sorted(only if only is not None else tools)
    probed = dict(zip(names, in_parallel(lambda n: probe_tool(n, tools[n]), names, jobs), strict=True))
    entries = []
    for name in names:
        entries.append({"name": name, **summary(name, probed[name]), **tools[name], **probed[name]})
    old = (
        {}
        if only is not None
        else dict(zip(OLD_NAMES, in_parallel(lambda n: old_name(n, *OLD_NAMES[n]), list(OLD_NAMES), jobs), strict=True))
    )
    return {
        "claude_code": cli.version(),
        "command": RECORD_COMMAND,
        "offers": {o.name: {"tools": o.tools, "env": dict(o.env), "mcp_server": o.mcp} for o in cli.OFFERS},
        "old_names": old,
        "tools": entries,
    }


def dumps(doc: dict[str, Any]) -> str:
    """The recording as JSON with one tool a line, so a re-recording's diff reads tool by tool."""
    head = {k: v for k, v in doc.items() if k != "tools"}
    text = json.dumps(head, indent=1, sort_keys=True)[:-2]
    lines = ",\n".join("  " + json.dumps(tool, sort_keys=True) for tool in doc["tools"])
    return f'{text},\n "tools": [\n{lines}\n ]\n}}\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.policy.tools_oracle.record", description=__doc__)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="probe only these tools; print JSON")
    parser.add_argument("--jobs", type=int, default=4, help="CLI processes at once (default 4)")
    args = parser.parse_args(argv)
    doc = record(args.jobs, args.only)
    if args.only is not None:
        json.dump(doc["tools"], sys.stdout, indent=1)
        return 0
    path = recording_path(doc["claude_code"])
    path.write_text(dumps(doc))
    asking = [t["name"] for t in doc["tools"] if t["needs_permission"]]
    print(f"{len(doc['tools'])} tools recorded with Claude Code {doc['claude_code']} in {path.relative_to(REPO)}")
    print(f"needs permission ({len(asking)}): {', '.join(asking)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
