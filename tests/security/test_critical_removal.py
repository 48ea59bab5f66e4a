"""``rm``/``rmdir`` of a critical path asks in every mode, whatever the rules say.

Claude Code 2.1.332 asks before removing ``/``, anything ending in ``/*``, a top-level
directory (``/usr``, ``/etc``, ``/tmp``), the home, and the working directory or any of
its ancestors ("Dangerous rm operation on critical path: …", "… on working directory or
its ancestor: …"). No allow rule (not even ``Bash``), no mode (acceptEdits,
bypassPermissions) and no classifier answers it; dontAsk and a headless session deny it.
The home is the agent's (its facts), never the server's.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy import decide
from tests.policy.calls import gather

HOME = "/home/alice"
CWD = "/home/alice/project"

CRITICAL = [
    "/",
    "//",
    "/*",
    "/.",
    "/usr",
    "/usr/",
    "/usr/*",
    "/etc",
    "/var/../etc",
    "/tmp",
    "/home",
    "/u*",
    "~",
    "~/",
    "~/.",
    "~/*",
    "$HOME",
    '"$HOME"',
    "${HOME}",
    '"$HOME"/',
    HOME,
    HOME + "/",
    ".",
    "./",
    "..",
    "./..",
    "../..",
    "../project",
    CWD,
    "~/project",
    "*",
    "./*",
    "build/*",
]
REMOVERS = [
    "rm -rf {t}",
    "rm -fr {t}",
    "rm -r -f {t}",
    "rm -Rf {t}",
    "rm --recursive --force {t}",
    "rm {t}",
    "rm -rf -- {t}",
    "rmdir {t}",
    "rm -rf build {t}",
    "sudo rm -rf {t}",
    "sudo -u root rm -rf {t}",
    "timeout 5 rm -rf {t}",
    "nice -n 5 rm -rf {t}",
    "nohup rm -rf {t}",
    "env rm -rf {t}",
    "command rm -rf {t}",
    "/bin/rm -rf {t}",
    "\\rm -rf {t}",
    "bash -c 'rm -rf {t}'",
    "echo ok && rm -rf {t}",
    "true; rm -rf {t}",
    "ls | rm -rf {t}",
    "(rm -rf {t})",
    "rm -rf {t} &",
]
# Rule sets that would allow an ordinary rm: a prefix rule, a wrapper's, the whole tool.
ALLOWING = [
    [],
    ["Bash(rm:*)"],
    ["Bash(rm -rf:*)", "Bash(sudo:*)", "Bash(rmdir:*)"],
    ["Bash"],
    ["Bash(*)"],
]
ASKING_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "auto")


def decide_bash(command: str, mode: str, allow: list[str], context: str = "interactive", facts: bool = True) -> Any:
    doc: dict[str, Any] = {
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "cwd": CWD,
        "mode": mode,
        "context": context,
        "rules": [{"source": "projectSettings", "permissions": {"allow": allow}}],
        "classifier_verdict": {"name": "permissive", "behavior": "allow"},
    }
    if facts:
        doc["facts"] = gather("Bash", {"command": command}, CWD, [], HOME)
    else:
        doc["home"] = HOME
    return decide(doc)


def assert_critical(decision: Any, command: str) -> None:
    assert decision.behavior == "ask", (command, decision.reason)
    assert decision.reason["type"] == "safetyCheck", (command, decision.reason)
    assert "Dangerous rm" in decision.reason["detail"] or "Dangerous rmdir" in decision.reason["detail"]


class CriticalRemovalTests:
    @pytest.mark.parametrize(
        ("command", "detail"),
        [
            ("rm -rf /", "critical path: /"),
            ("rm -fr ~/", f"critical path: {HOME}"),
            ('rm -r -f "$HOME"', f"critical path: {HOME}"),
            ("sudo rm -rf /usr", "critical path: /usr"),
            ("cd / && rm -rf *", "/*"),
            ("rm -rf ./..", f"critical path: {HOME}"),
            ("rm -rf .", f"working directory or its ancestor: {CWD}"),
            ("cd .. && rm -rf project", f"working directory or its ancestor: {CWD}"),
            ("rmdir /srv", "critical path: /srv"),
        ],
    )
    @pytest.mark.parametrize("mode", ASKING_MODES)
    def test_it_asks_for_the_classic_spellings_in_every_mode(self, command: str, detail: str, mode: str) -> None:
        decision = decide_bash(command, mode, ["Bash"])
        assert_critical(decision, command)
        assert decision.reason["detail"].endswith(detail), decision.reason

    @pytest.mark.parametrize("command", ["rm -rf /", "rm -rf ~", "rm -rf ..", "rm -rf ."])
    def test_it_denies_where_nobody_can_be_asked(self, command: str) -> None:
        assert decide_bash(command, "dontAsk", ["Bash"]).behavior == "deny"
        assert decide_bash(command, "bypassPermissions", ["Bash"], context="headless").behavior == "deny"

    def test_a_deny_rule_still_denies(self) -> None:
        doc = {
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf ~"},
            "cwd": CWD,
            "mode": "bypassPermissions",
            "rules": [{"source": "projectSettings", "permissions": {"deny": ["Bash(rm:*)"]}}],
            "facts": gather("Bash", {"command": "rm -rf ~"}, CWD, [], HOME),
        }
        assert decide(doc).behavior == "deny"

    @pytest.mark.parametrize(
        "command",
        [
            "rm -rf build",
            "rm -rf ~/other",
            "rm -rf /tmp/scratch",
            "rm -rf /srv/outside/sub",
            "rm -f *.pyc",
            "rmdir build/empty",
            "rm -rf ./build/../dist",
            "echo / ~ .. && rm -rf build",
        ],
    )
    def test_it_leaves_ordinary_removals_to_the_mode(self, command: str) -> None:
        assert decide_bash(command, "bypassPermissions", []).behavior == "allow", command

    def test_the_home_is_the_agents_never_the_servers(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("HOME", "/home/server")
        assert decide_bash("rm -rf /home/server/", "bypassPermissions", []).behavior == "allow"
        assert_critical(decide_bash("rm -rf /home/alice/", "bypassPermissions", []), "rm -rf /home/alice/")
        assert_critical(decide_bash("rm -rf ~", "bypassPermissions", []), "rm -rf ~")

    def test_a_home_nobody_reported_is_still_the_home(self) -> None:
        doc = {
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf ~"},
            "cwd": CWD,
            "mode": "bypassPermissions",
        }
        assert_critical(decide(doc), "rm -rf ~")


class CriticalRemovalCorpusTests:
    @settings(max_examples=600, deadline=None)
    @given(
        remover=st.sampled_from(REMOVERS),
        target=st.sampled_from(CRITICAL),
        mode=st.sampled_from(ASKING_MODES),
        allow=st.sampled_from(ALLOWING),
    )
    def test_it_never_allows_removing_a_critical_path(
        self, remover: str, target: str, mode: str, allow: list[str]
    ) -> None:
        command = remover.format(t=target)
        assert_critical(decide_bash(command, mode, allow), command)

    @settings(max_examples=200, deadline=None)
    @given(
        remover=st.sampled_from(REMOVERS),
        target=st.sampled_from(CRITICAL),
        allow=st.sampled_from(ALLOWING),
        headless=st.booleans(),
    )
    def test_it_denies_removing_a_critical_path_where_nobody_is_asked(
        self, remover: str, target: str, allow: list[str], headless: bool
    ) -> None:
        command = remover.format(t=target)
        if headless:
            decision = decide_bash(command, "bypassPermissions", allow, context="headless")
        else:
            decision = decide_bash(command, "dontAsk", allow)
        assert decision.behavior == "deny", command
