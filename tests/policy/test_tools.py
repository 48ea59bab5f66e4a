"""The tool registry and two-phase input validation."""

from __future__ import annotations

from pathlib import Path

from policy import decide, tools
from policy.tools.validation import Disk, validate
from tests.policy.calls import request


class ToolLookupTests:
    def test_it_finds_builtins_by_name(self) -> None:
        for name in (
            "Bash",
            "Read",
            "Write",
            "Edit",
            "MultiEdit",
            "NotebookEdit",
            "Glob",
            "Grep",
            "WebFetch",
            "WebSearch",
            "Task",
            "TodoWrite",
        ):
            found = tools.lookup(name)
            assert found.spec is not None and found.spec.name == name

    def test_it_resolves_an_alias_without_warning(self) -> None:
        found = tools.lookup("Agent")
        assert found.spec is not None and found.spec.name == "Task"
        assert found.warnings == []

    def test_it_warns_about_a_deprecated_alias(self) -> None:
        decision = decide(request("KillBash", {"shell_id": "7"}))
        assert decision.tool_name == "TaskStop"
        assert decision.warnings == ["Tool name 'KillBash' is deprecated; use 'TaskStop' instead."]

    def test_it_passes_mcp_tools_through_with_any_input(self) -> None:
        found = tools.lookup("mcp__db__query")
        assert found.spec is not None and found.spec.kind == "mcp"
        decision = decide(request("mcp__db__query", {"sql": "select 1", "n": [1, {"x": None}]}))
        assert decision.tool_input == {"sql": "select 1", "n": [1, {"x": None}]}

    def test_it_leaves_an_unknown_tool_to_a_person(self) -> None:
        decision = decide(request("Hallucinated", {"any": ["input"]}))
        assert decision.behavior == "ask" and decision.reserved
        assert decision.reason == {"type": "other", "detail": "unknown tool: a person decides"}
        assert decision.tool_input == {"any": ["input"]}


class ValidationTests:
    def test_it_coerces_strings_to_numbers(self) -> None:
        decision = decide(request("Bash", {"command": "ls", "timeout": "5"}))
        assert decision.tool_input == {"command": "ls", "timeout": 5}

    def test_it_formats_schema_errors_for_the_model(self) -> None:
        decision = decide(request("Bash", {"timeout": 5}))
        assert decision.message.startswith("<tool_use_error>InputValidationError: Bash failed:")
        assert "command" in decision.message
        assert decision.reason == {"type": "other", "detail": "validation"}

    def test_it_only_runs_semantic_checks_after_the_schema_passes(self) -> None:
        spec = tools.lookup("Edit").spec
        assert spec is not None
        result = validate(spec, {"file_path": 3}, Disk("/srv"))
        assert not result.ok and "old_string" in result.message

    def test_it_rejects_an_edit_of_a_missing_file(self, tmp_path: Path) -> None:
        doc = request("Edit", {"file_path": "nope.py", "old_string": "a", "new_string": "b"}, cwd=str(tmp_path))
        assert "File does not exist" in decide(doc).message

    def test_it_accepts_an_edit_of_an_existing_file(self, tmp_path: Path) -> None:
        (tmp_path / "a.py").write_text("a")
        doc = request(
            "Edit", {"file_path": "a.py", "old_string": "a", "new_string": "b"}, cwd=str(tmp_path), mode="acceptEdits"
        )
        assert decide(doc).behavior == "allow"

    def test_it_rejects_writing_over_a_directory(self, tmp_path: Path) -> None:
        (tmp_path / "d").mkdir()
        doc = request("Write", {"file_path": "d", "content": ""}, cwd=str(tmp_path))
        assert "is a directory" in decide(doc).message

    def test_it_turns_a_private_address_into_a_safety_check_prompt(self) -> None:
        decision = decide(request("WebFetch", {"url": "http://127.0.0.1/", "prompt": "p"}))
        assert decision.behavior == "ask"
        assert decision.reason["type"] == "safetyCheck"
        assert "private" in decision.reason["detail"]

    def test_it_checks_a_recorded_tool_against_claude_codes_schema(self) -> None:
        missing = decide(request("CronCreate", {"cron": "0 9 * * 1"}))
        assert missing.behavior == "deny"
        assert missing.message == (
            "<tool_use_error>InputValidationError: CronCreate failed: prompt: Field required</tool_use_error>"
        )
        extra = decide(request("CronCreate", {"cron": "0 9 * * 1", "prompt": "p", "surprise": 1}))
        assert "surprise: Extra inputs are not permitted" in extra.message
        wrong = decide(request("CronCreate", {"cron": "0 9 * * 1", "prompt": "p", "recurring": "yes"}))
        assert "recurring: Input should be of type boolean" in wrong.message
        enum = decide(request("ExitWorktree", {"action": "destroy"}))
        assert "action: Input should be one of 'keep', 'remove'" in enum.message

    def test_it_takes_what_claude_code_2_1_332_sends_to_its_own_tools(self) -> None:
        read = decide(request("Read", {"file_path": "README.md", "allow_large": True}))
        fetch = decide(request("WebFetch", {"url": "https://docs.python.org/3/", "prompt": "p", "offset": 2}))
        assert read.reason != {"type": "other", "detail": "validation"}
        assert fetch.behavior == "allow"

    def test_it_rejects_a_non_object_input(self) -> None:
        decision = decide(request("Bash", ["ls"]))  # type: ignore[arg-type]
        assert decision.behavior == "deny"
        assert "tool_input must be an object" in decision.message
