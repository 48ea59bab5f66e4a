"""Hypothesis properties: deny rules always hold, allow rules only add allows, no crash."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy import decide

SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
MODES = ["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"]
CONTEXTS = ["interactive", "headless", "coordinator"]
SOURCES = [
    "session",
    "command",
    "cliArg",
    "userSettings",
    "projectSettings",
    "localSettings",
    "flagSettings",
    "policySettings",
]
WORDS = [
    "git",
    "status",
    "push",
    "rm",
    "-rf",
    "/",
    "ls",
    "npm",
    "run",
    "test",
    "curl",
    "echo",
    "x",
    "&&",
    ";",
    "|",
    "$(rm x)",
    "sudo",
    "FOO=1",
    "timeout",
    "5",
    "bash",
    "-c",
    "'rm -rf /'",
    "\n",
    "~/.ssh/id_rsa",
    "../..",
    ">",
    "out",
]

commands = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
hook_outputs = st.lists(
    st.fixed_dictionaries(
        {"permissionDecision": st.sampled_from(["allow", "ask", "deny"])},
        optional={"updatedInput": st.fixed_dictionaries({"command": commands})},
    ),
    max_size=3,
)
allow_rules = st.lists(
    st.sampled_from(
        [
            "Bash",
            "Bash(git *)",
            "Bash(rm:*)",
            "Bash(echo:*)",
            "Bash(*)",
            "Bash(ls:*)",
            "Bash(sudo:*)",
            "Bash(bash:*)",
            "Bash(* -rf /)",
        ]
    ),
    max_size=4,
)


def _doc(command: str, **extra: Any) -> dict[str, Any]:
    return {"tool_name": "Bash", "tool_input": {"command": command}, "cwd": "/srv/p", "home": "/home/a", **extra}


def _rule(text: str, behavior: str, source: str) -> dict[str, Any]:
    return {"rule": text, "behavior": behavior, "source": source}


class DenyRulePropertyTests:
    @SETTINGS
    @given(
        command=commands,
        mode=st.sampled_from(MODES),
        context=st.sampled_from(CONTEXTS),
        hooks=hook_outputs,
        allows=allow_rules,
        deny_source=st.sampled_from(SOURCES),
        allow_source=st.sampled_from(SOURCES),
        verdict=st.sampled_from([None, "allow", "deny"]),
    )
    def test_it_never_lets_anything_override_a_deny_rule(
        self,
        command: str,
        mode: str,
        context: str,
        hooks: list[Any],
        allows: list[str],
        deny_source: str,
        allow_source: str,
        verdict: str | None,
    ) -> None:
        rules = [_rule("Bash", "deny", deny_source)] + [_rule(a, "allow", allow_source) for a in allows]
        decision = decide(
            _doc(
                command,
                mode=mode,
                context=context,
                pre_tool_use_hooks=hooks,
                rules=rules,
                classifier_verdict={"name": "c", "behavior": verdict},
                permission_request_hooks=[{"behavior": "allow"}],
            )
        )
        assert decision.behavior == "deny"

    @SETTINGS
    @given(command=commands, mode=st.sampled_from(MODES), hooks=hook_outputs, allows=allow_rules)
    def test_it_never_lets_a_hook_or_mode_allow_rm_under_a_policy_deny(
        self, command: str, mode: str, hooks: list[Any], allows: list[str]
    ) -> None:
        rules = [_rule("Bash(rm:*)", "deny", "policySettings")] + [_rule(a, "allow", "session") for a in allows]
        decision = decide(_doc(command, mode=mode, pre_tool_use_hooks=hooks, rules=rules))
        final_command = decision.tool_input.get("command", "")
        if decision.behavior == "allow":
            assert not any(c.name == "rm" for c in _analyse(final_command).commands)


def _analyse(command: str) -> Any:
    from policy.shell import analyse

    return analyse(command, cwd="/srv/p", home="/home/a")


class AllowRulePropertyTests:
    @SETTINGS
    @given(
        command=commands,
        mode=st.sampled_from(MODES),
        context=st.sampled_from(CONTEXTS),
        base=allow_rules,
        extra=st.sampled_from(["Bash", "Bash(git *)", "Bash(rm:*)", "Bash(echo:*)"]),
    )
    def test_it_never_turns_an_allow_into_a_deny_by_adding_an_allow_rule(
        self, command: str, mode: str, context: str, base: list[str], extra: str
    ) -> None:
        rules = [_rule(r, "allow", "userSettings") for r in base] + [_rule("Bash(curl:*)", "deny", "policySettings")]
        before = decide(_doc(command, mode=mode, context=context, rules=rules))
        after = decide(_doc(command, mode=mode, context=context, rules=[*rules, _rule(extra, "allow", "session")]))
        if before.behavior == "allow":
            assert after.behavior == "allow"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


class RobustnessPropertyTests:
    @SETTINGS
    @given(
        doc=st.dictionaries(
            st.sampled_from(
                [
                    "tool_name",
                    "tool_input",
                    "cwd",
                    "mode",
                    "context",
                    "home",
                    "rules",
                    "pre_tool_use_hooks",
                    "additional_directories",
                    "denial_state",
                    "classifier_verdict",
                    "permission_request_hooks",
                    "session_id",
                ]
            ),
            json_values,
            max_size=8,
        )
    )
    def test_it_never_raises_on_arbitrary_documents(self, doc: dict[str, Any]) -> None:
        decision = decide(doc)
        assert decision.behavior in ("allow", "deny", "ask")
        decision.to_dict()

    @SETTINGS
    @given(command=st.text(max_size=300), tool=st.sampled_from(["Bash", "Read", "Write", "Glob"]))
    def test_it_never_raises_on_arbitrary_unicode(self, command: str, tool: str) -> None:
        tool_input = {"command": command, "file_path": command, "content": command, "pattern": command}
        key = {"Bash": ["command"], "Read": ["file_path"], "Write": ["file_path", "content"], "Glob": ["pattern"]}[tool]
        decision = decide(
            {
                "tool_name": tool,
                "tool_input": {k: tool_input[k] for k in key},
                "cwd": "/srv/p",
                "rules": [_rule("Bash(ls:*)", "allow", "session")],
            }
        )
        assert decision.behavior in ("allow", "deny", "ask")

    def test_it_handles_a_megabyte_command_with_nul_bytes(self) -> None:
        for command in ("ls " + "a" * 1_000_000, "ls\x00" * 250_000, "é" * 500_000):
            decision = decide(_doc(command, rules=[_rule("Bash(ls:*)", "allow", "session")]))
            assert decision.behavior == "ask"
