"""Classify tool errors for telemetry without leaking paths or code (SPEC §8)."""

from __future__ import annotations

import errno as errno_module


def classify_tool_error(exc: object) -> str:
    """A telemetry-safe message, else ``Error:ENOENT``, else a readable class name."""
    if not isinstance(exc, BaseException):
        return "UnknownError"
    safe = getattr(exc, "telemetry_message", None)
    if isinstance(safe, str) and safe:
        return safe
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code in errno_module.errorcode:
        return f"Error:{errno_module.errorcode[code]}"
    name = type(exc).__name__
    # Short names are usually minified or meaningless; say nothing rather than noise.
    if len(name) > 3:
        return name
    return "Error"


class TelemetrySafeError(Exception):
    """An error whose ``telemetry_message`` may be recorded as it is."""

    def __init__(self, message: str, telemetry_message: str) -> None:
        super().__init__(message)
        self.telemetry_message = telemetry_message
