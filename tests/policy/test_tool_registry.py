"""The tool registry is Claude Code 2.1.332's, as the recording of the real CLI shows it.

The recording (``policy/tools/claude-code-2.1.332-tools.json``) is re-made with
``tests/policy/tools_oracle/record.py``; ``tests/e2e/claude_code/test_claude_tools_live.py``
checks a sample of it against the CLI in every `make test`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from policy import decide, tools
from policy.tools import recording
from tests.policy.calls import request

RECORDED = json.loads(recording.RECORDING_PATH.read_text())
CALLABLE = [tool for tool in RECORDED["tools"] if tool["callable"]]
NO_PERMISSION = sorted(tool["name"] for tool in CALLABLE if not tool["needs_permission"])


def _minimal(tool: dict[str, Any]) -> dict[str, Any]:
    """The recorded input of the tool's first probe, with the layout's paths filled in."""
    text = json.dumps(tool["probes"][0]["input"]).replace("{project}", "/srv/project").replace("{outside}", "/srv")
    found: dict[str, Any] = json.loads(text)
    return found


class RegistryMatchesTheRecordingTests:
    def test_it_knows_every_tool_claude_code_offers_and_who_asks(self) -> None:
        registry = {}
        for tool in CALLABLE:
            spec = tools.lookup(tool["name"]).spec
            assert spec is not None and spec.known, tool["name"]
            registry[tool["name"]] = spec.needs_permission
        assert registry == {tool["name"]: tool["needs_permission"] for tool in CALLABLE}
        assert len(registry) >= 35

    def test_it_keeps_only_the_listed_legacy_tools_beyond_the_recording(self) -> None:
        recorded = {tools.lookup(tool["name"]).spec.name for tool in CALLABLE}  # type: ignore[union-attr]
        beyond = {name for name, spec in tools.BUILTIN_TOOLS.items() if name not in recorded}
        assert beyond == {name for name, spec in tools.BUILTIN_TOOLS.items() if spec.legacy}
        # Each is a name Claude Code 2.1.332 refuses as no tool at all.
        gone = {name for name, target in recording.old_names().items() if target is None}
        assert beyond == gone

    def test_it_resolves_the_old_names_claude_code_still_accepts(self) -> None:
        accepted = {name: target for name, target in recording.old_names().items() if target is not None}
        assert accepted == {"Task": "Agent", "KillShell": "TaskStop", "KillBash": "TaskStop"}
        for old, target in accepted.items():
            assert tools.lookup(old).spec is tools.lookup(target).spec

    def test_it_asks_where_claude_code_asks_even_under_an_allow_rule(self) -> None:
        asked_anyway = set()
        for tool in CALLABLE:
            allow = next(r for r in tool["rules"] if r["behavior"] == "allow" and r["rule"] == tool["name"])
            if allow["claude"]["behavior"] == "ask":
                asked_anyway.add(tool["name"])
        assert asked_anyway == {"AskUserQuestion", "ExitPlanMode"}
        unanswered = {n for n, spec in tools.BUILTIN_TOOLS.items() if not spec.allow_rules_answer}
        assert unanswered == asked_anyway

    def test_gatehouses_own_schemas_take_every_key_claude_code_sends(self) -> None:
        for tool in CALLABLE:
            spec = tools.lookup(tool["name"]).spec
            if spec is None or spec.schema is None:
                continue
            schema = tool["input_schema"]
            fields = spec.schema.model_fields
            keeps_extras = spec.schema.model_config.get("extra") == "allow"
            assert keeps_extras or set(schema.get("properties", {})) <= set(fields), tool["name"]
            required = {key for key, field in fields.items() if field.is_required()}
            assert required == set(schema.get("required", [])), tool["name"]

    def test_every_recorded_probe_passes_validation(self) -> None:
        for tool in CALLABLE:
            decision = decide(request(tool["name"], _minimal(tool), facts={}))
            assert decision.reason != {"type": "other", "detail": "validation"}, (tool["name"], decision.message)


class PermissionFreeToolTests:
    @pytest.mark.parametrize("name", NO_PERMISSION)
    def test_it_allows_a_tool_claude_code_runs_without_asking(self, name: str) -> None:
        tool = next(t for t in CALLABLE if t["name"] == name)
        for mode in ("default", "plan", "dontAsk", "auto"):
            decision = decide(request(name, _minimal(tool), mode=mode, context="headless"))
            assert decision.behavior == "allow", (mode, decision.reason)
            assert decision.reason == {"type": "other", "detail": "no permission needed"}
            assert {"layer": "toolCheck", "result": "allow", "detail": "no permission needed"} in decision.trace

    def test_deny_and_ask_rules_still_apply_to_it(self) -> None:
        call = {"description": "d", "prompt": "p", "subagent_type": "Plan"}
        rules = [{"source": "userSettings", "permissions": {"deny": ["CronCreate"], "ask": ["Agent(Plan)"]}}]
        denied = decide(request("CronCreate", {"cron": "0 9 * * 1", "prompt": "p"}, rules=rules))
        asked = decide(request("Agent", call, rules=rules, mode="bypassPermissions"))
        assert (denied.behavior, denied.reason["rule"]) == ("deny", "CronCreate")
        assert (asked.behavior, asked.reason["rule"], asked.reserved) == ("ask", "Task(Plan)", True)

    def test_it_denies_a_tool_whose_own_check_refuses_every_call(self) -> None:
        rules = [{"source": "userSettings", "permissions": {"allow": ["ReadMcpResourceDirTool"]}}]
        decision = decide(request("ReadMcpResourceDirTool", {"server": "s", "uri": "s://x"}, rules=rules))
        assert decision.behavior == "deny"
        assert decision.message == "Directory listing is not enabled in this build."


class UnknownToolTests:
    def test_it_asks_a_person_in_every_mode_but_dont_ask(self) -> None:
        for mode in ("default", "acceptEdits", "plan", "bypassPermissions", "auto"):
            decision = decide(request("TeleportFiles", {"where": "mars"}, mode=mode))
            assert (decision.behavior, decision.reserved) == ("ask", True), mode
            assert decision.reason == {"type": "other", "detail": "unknown tool: a person decides"}
            assert decision.message == "TeleportFiles is a tool Gatehouse does not know: a person decides."
        assert decide(request("TeleportFiles", {}, mode="dontAsk")).behavior == "deny"

    def test_a_team_setting_makes_it_a_deny(self) -> None:
        decision = decide(request("TeleportFiles", {"where": "mars"}, unknown_tools="deny"))
        assert decision.behavior == "deny"
        assert decision.reason == {"type": "other", "detail": "unknown tool: the team denies unknown tools"}
        assert {"layer": "unknownTool", "result": "deny", "setting": "deny"} in decision.trace

    def test_rules_naming_it_still_apply(self) -> None:
        def ruled(behavior: str, unknown_tools: str = "ask") -> str:
            rules = [{"source": "projectSettings", "permissions": {behavior: ["TeleportFiles"]}}]
            return decide(request("TeleportFiles", {}, rules=rules, unknown_tools=unknown_tools)).behavior

        assert (ruled("deny"), ruled("ask", "deny"), ruled("allow", "deny")) == ("deny", "ask", "allow")

    def test_a_hooks_allow_does_not_answer_it(self) -> None:
        hooks = [{"hook": "mine", "output": {"hookSpecificOutput": {"permissionDecision": "allow"}}}]
        decision = decide(request("TeleportFiles", {}, pre_tool_use_hooks=hooks))
        assert decision.behavior == "ask"

    def test_it_refuses_an_unknown_value_for_the_setting(self) -> None:
        decision = decide(request("TeleportFiles", {}, unknown_tools="allow"))
        assert decision.behavior == "deny"
        assert decision.reason == {"type": "other", "detail": "invalid request"}

    def test_python_m_policy_decide_takes_the_setting(self) -> None:
        def behavior(setting: str) -> str:
            doc = {"tool_name": "TeleportFiles", "tool_input": {}, "unknown_tools": setting}
            command = [sys.executable, "-m", "policy", "decide"]
            done = subprocess.run(command, input=json.dumps(doc), capture_output=True, text=True, timeout=60)
            return str(json.loads(done.stdout)["behavior"])

        assert (behavior("deny"), behavior("ask")) == ("deny", "ask")
