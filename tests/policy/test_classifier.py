"""The built-in deterministic read-only classifier."""

from __future__ import annotations

import pytest

from policy.classifier import classify_readonly


def _bash(command: str) -> str | None:
    verdict = classify_readonly("Bash", {"command": command}, cwd="/srv/p", home="/home/a")
    assert verdict["name"] == "readonly"
    return verdict["behavior"]


class ReadonlyClassifierTests:
    @pytest.mark.parametrize(
        "command",
        ["ls", "cat README.md", "git status", "git log -5", "grep -rn TODO src", "ls src | wc -l", "git diff HEAD"],
    )
    def test_it_allows_read_only_commands_inside_cwd(self, command: str) -> None:
        assert _bash(command) == "allow"

    @pytest.mark.parametrize(
        "command",
        [
            "cat /etc/passwd",
            "cat ../../x",
            "git push",
            "rm x",
            "ls > out.txt && rm x",
            "echo $(id)",
            "sort -o out x",
            "git branch -D main",
            "sudo ls",
            "find . -delete",
        ],
    )
    def test_it_has_no_opinion_on_anything_else(self, command: str) -> None:
        assert _bash(command) is None

    @pytest.mark.parametrize("tool", ["Read", "Glob", "Grep", "TodoWrite"])
    def test_it_allows_safe_tools(self, tool: str) -> None:
        assert classify_readonly(tool, {})["behavior"] == "allow"

    def test_it_has_no_opinion_on_edits(self) -> None:
        assert classify_readonly("Write", {"file_path": "x", "content": ""})["behavior"] is None
