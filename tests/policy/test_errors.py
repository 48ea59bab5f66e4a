"""Telemetry-safe classification of tool errors (SPEC §8)."""

from __future__ import annotations

from policy.errors import TelemetrySafeError, classify_tool_error


class Bad(Exception):
    pass


class ToolErrorClassificationTests:
    def test_it_prefers_the_telemetry_safe_message(self) -> None:
        error = TelemetrySafeError("/home/alice/secret failed", "edit failed: stale file")
        assert classify_tool_error(error) == "edit failed: stale file"

    def test_it_uses_the_errno_code(self) -> None:
        assert classify_tool_error(FileNotFoundError(2, "No such file", "/home/a/x")) == "Error:ENOENT"
        assert classify_tool_error(PermissionError(13, "denied")) == "Error:EACCES"

    def test_it_uses_a_readable_class_name(self) -> None:
        assert classify_tool_error(ValueError("/secret/path")) == "ValueError"

    def test_it_hides_short_class_names(self) -> None:
        assert classify_tool_error(Bad("x")) == "Error"

    def test_it_calls_non_exceptions_unknown(self) -> None:
        assert classify_tool_error("boom") == "UnknownError"
        assert classify_tool_error(None) == "UnknownError"
