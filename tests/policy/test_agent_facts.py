"""The engine decides on the agent's reported facts, never on the server's disk or home."""

from __future__ import annotations

import os
import os.path
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.facts import lexical_path as agent_lexical_path
from policy import decide
from policy.facts import MAX_PATHS, FactsError, parse_facts
from policy.paths import lexical_path
from tests.policy.calls import CWD, HOME, STANDARD_RULES, request
from tests.policy.test_decision_table import CASES, CODES


class _Forbidden(AssertionError):
    pass


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise _Forbidden(f"the engine touched the server: {args!r}")


class _NoHome(dict[str, str]):
    """``os.environ`` without a readable HOME: reading it fails the test."""

    def __getitem__(self, key: str) -> str:
        if key == "HOME":
            raise _Forbidden("the engine read the server's HOME")
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        if key == "HOME":
            raise _Forbidden("the engine read the server's HOME")
        return super().get(key, default)


@contextmanager
def server_disk_unreadable() -> Iterator[None]:
    """``os.stat``, ``os.lstat``, ``realpath``, ``expanduser`` and HOME all fail inside."""
    saved = (os.stat, os.lstat, os.path.realpath, os.path.expanduser, os.environ)
    os.stat, os.lstat = _refuse, _refuse
    os.path.realpath, os.path.expanduser = _refuse, _refuse
    # Replaced, not cleared, on purpose: reading HOME must fail, and only in here.
    os.environ = _NoHome(saved[4])  # type: ignore[assignment]  # noqa: B003
    try:
        yield
    finally:
        os.stat, os.lstat, os.path.realpath, os.path.expanduser, os.environ = saved


def _bare(tool: str, tool_input: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A request as a curl hook sends it: no facts at all, and no home."""
    doc = request(tool, tool_input, **extra)
    del doc["facts"]
    if "home" not in extra:
        del doc["home"]
    return doc


class ServerDiskUnreadableTests:
    @pytest.mark.parametrize(("tool", "tool_input", "mode", "code"), CASES)
    def test_it_decides_every_table_case_from_the_facts_alone(
        self, tool: str, tool_input: dict[str, Any], mode: str, code: str
    ) -> None:
        behavior, reason_type, (layer, result) = CODES[code]
        doc = request(tool, tool_input, mode=mode)  # gathered first, as the agent would
        with server_disk_unreadable():
            decision = decide(doc)
        steps = [(s["layer"], s["result"]) for s in decision.trace]
        assert (decision.behavior, decision.reason["type"]) == (behavior, reason_type), (decision.reason, steps)
        assert (layer, result) in steps, steps

    def test_it_really_makes_the_disk_unreadable(self) -> None:
        with server_disk_unreadable(), pytest.raises(_Forbidden):
            os.stat("/")


# Calls an allow rule or the working directory would allow, were their paths known.
ALLOWED_WITH_FACTS = [
    ("Edit", {"file_path": "src/app.py", "old_string": "", "new_string": "x"}),
    ("Write", {"file_path": "/srv/project/src/new.py", "content": "x"}),
    ("Read", {"file_path": "src/app.py"}),
    ("Read", {"file_path": "~/notes/todo.md"}),
    ("Grep", {"pattern": "TODO", "path": "src"}),
    ("Bash", {"command": "echo hi > src/out.txt"}),
    ("Bash", {"command": "cat README.md"}),
    ("Bash", {"command": "ls ./src"}),
]


class MissingFactsTests:
    @pytest.mark.parametrize(("tool", "tool_input"), ALLOWED_WITH_FACTS)
    @pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions", "auto"])
    def test_it_asks_instead_of_allowing(self, tool: str, tool_input: dict[str, Any], mode: str) -> None:
        assert decide(request(tool, tool_input, mode=mode)).behavior == "allow"
        decision = decide(_bare(tool, tool_input, mode=mode))
        assert decision.behavior == "ask", decision.trace
        assert "the agent did not report" in decision.message

    def test_it_never_denies_because_the_server_cannot_see_a_file(self) -> None:
        edit = {"file_path": "src/app.py", "old_string": "old", "new_string": "new"}
        assert decide(_bare("Edit", edit)).behavior == "ask"
        told_missing = {"paths": {f"{CWD}/src/app.py": {"real": f"{CWD}/src/app.py", "exists": False, "dir": False}}}
        decision = decide(request("Edit", edit, facts=told_missing))
        assert decision.behavior == "deny"
        assert "File does not exist" in decision.message

    def test_it_accepts_an_edit_of_a_file_that_exists_only_on_the_agent(self) -> None:
        edit = {"file_path": "src/app.py", "old_string": "old", "new_string": "new"}
        facts = {"home": HOME, "paths": {f"{CWD}/src/app.py": {"real": f"{CWD}/src/app.py", "exists": True}}}
        assert decide(request("Edit", edit, facts=facts)).behavior == "allow"

    def test_it_still_denies_on_the_lexical_path(self) -> None:
        assert decide(_bare("Read", {"file_path": ".env"})).behavior == "deny"
        assert decide(_bare("Read", {"file_path": "/home/alice/.ssh/id_rsa"}, home=HOME)).behavior == "deny"

    def test_it_asks_when_a_home_rule_cannot_be_checked(self) -> None:
        decision = decide(_bare("Read", {"file_path": "/home/alice/.ssh/id_rsa"}, mode="auto"))
        assert decision.behavior == "ask"
        assert "home directory" in decision.message


class ReportedFactsTests:
    def test_it_takes_the_home_from_the_facts_over_the_top_level(self) -> None:
        facts = {"home": "/home/bob", "paths": {"/home/bob/.ssh/id_rsa": {"real": "/home/bob/.ssh/id_rsa"}}}
        decision = decide(request("Read", {"file_path": "/home/bob/.ssh/id_rsa"}, facts=facts))
        assert (decision.behavior, decision.reason.get("rule")) == ("deny", "Read(~/.ssh/**)")

    def test_it_denies_through_a_reported_symlink(self) -> None:
        facts = {"home": HOME, "paths": {f"{CWD}/notes": {"real": f"{HOME}/.ssh/id_rsa", "exists": True}}}
        assert decide(request("Read", {"file_path": "notes"}, facts=facts)).behavior == "deny"
        assert decide(request("Bash", {"command": "cat notes"}, facts=facts)).behavior == "deny"

    def test_it_does_not_allow_an_edit_through_a_link_leaving_the_allowed_tree(self) -> None:
        facts = {"home": HOME, "paths": {f"{CWD}/src/link": {"real": "/opt/elsewhere", "exists": True}}}
        decision = decide(request("Edit", {"file_path": "src/link", "old_string": "a", "new_string": "b"}, facts=facts))
        assert decision.behavior == "ask"

    def test_it_derives_paths_below_a_missing_directory(self) -> None:
        facts = parse_facts({"paths": {"/a/b": {"real": "/x/b", "exists": False, "dir": False}}})
        assert (facts.real("/a/b/c/d"), facts.exists("/a/b/c"), facts.real("/a/z")) == ("/x/b/c/d", False, None)


BAD_FACTS: list[Any] = [
    [],
    "x",
    {"home": "relative"},
    {"home": "/a/../b"},
    {"user": 5},
    {"truncated": "no"},
    {"paths": []},
    {"paths": {"relative": {}}},
    {"paths": {"/a/": {}}},
    {"paths": {"/a": {"real": "b"}}},
    {"paths": {"/a": {"real": "/b/../c"}}},
    {"paths": {"/a": {"real": "/b/./c"}}},
    {"paths": {"/a": {"real": "/b/"}}},
    {"paths": {"/a": {"real": "//b"}}},
    {"paths": {"/a": {"real": "/b\x00"}}},
    {"paths": {"/a": {"dir": 1}}},
    {"paths": {"/a": {"exists": 0}}},
    {"paths": {"/a": {"exists": "yes"}}},
    {"paths": {"/a": {"surprise": 1}}},
    {"paths": {f"/p{i}": {} for i in range(MAX_PATHS + 1)}},
    {"extra": 1},
]


class FactsValidationTests:
    @pytest.mark.parametrize("facts", BAD_FACTS)
    def test_it_denies_a_malformed_facts_object(self, facts: Any) -> None:
        with pytest.raises(FactsError):
            parse_facts(facts)
        decision = decide(request("Read", {"file_path": "src/app.py"}, facts=facts))
        assert decision.behavior == "deny"
        assert decision.message.startswith("Invalid permission request: facts")


segments = st.sampled_from(["a", "b", "..", ".", "", "~", "src", ".ssh", "x y"])


class LexicalAgreementTests:
    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(segments, max_size=6), st.booleans(), st.sampled_from(["/srv/p", "/", "", "rel"]))
    def test_it_normalises_exactly_as_the_engine_does(self, parts: list[str], absolute: bool, cwd: str) -> None:
        path = ("/" if absolute else "") + "/".join(parts)
        assert agent_lexical_path(path, cwd, HOME) == lexical_path(path, cwd, HOME)

    @settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.sampled_from(["Read", "Edit", "Write", "Glob", "Grep"]),
        st.lists(segments, min_size=1, max_size=5),
        st.sampled_from(["default", "acceptEdits", "bypassPermissions", "auto", "plan"]),
    )
    def test_it_never_allows_a_path_call_without_facts(self, tool: str, parts: list[str], mode: str) -> None:
        path = "/".join(parts)
        field = {"Glob": "path", "Grep": "path"}.get(tool, "file_path")
        tool_input: dict[str, Any] = {field: path}
        if tool in ("Glob", "Grep"):
            tool_input["pattern"] = "*"
        elif tool == "Edit":
            tool_input |= {"old_string": "", "new_string": "x"}
        elif tool == "Write":
            tool_input["content"] = "x"
        doc = {"tool_name": tool, "tool_input": tool_input, "cwd": CWD, "mode": mode, "rules": STANDARD_RULES}
        assert decide(doc).behavior != "allow"


class PinnedRootsTests:
    @pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions", "auto"])
    @pytest.mark.parametrize(
        ("tool", "tool_input"),
        [*ALLOWED_WITH_FACTS[:3], ("WebFetch", {"url": "https://docs.python.org/", "prompt": "p"})],
    )
    def test_it_never_allows_from_a_cwd_outside_the_pinned_roots(
        self, mode: str, tool: str, tool_input: dict[str, Any]
    ) -> None:
        assert decide(request(tool, tool_input, mode=mode, pinned_roots=["/srv"])).behavior == "allow"
        decision = decide(request(tool, tool_input, mode=mode, pinned_roots=["/home/alice/work", "/opt"]))
        assert decision.behavior == "ask"
        assert "pinned project roots" in decision.message

    def test_it_refuses_a_relative_pinned_root(self) -> None:
        decision = decide(request("Read", {"file_path": "src/app.py"}, pinned_roots=["srv"]))
        assert decision.behavior == "deny" and "pinned_roots" in decision.message
