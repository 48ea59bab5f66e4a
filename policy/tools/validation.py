"""Two-phase input validation: schema with coercion, then per-tool semantic checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from policy.facts import NO_FACTS, AgentFacts
from policy.paths import lexical_path, names_home
from policy.tools import ToolSpec
from policy.tools.json_schema import problems
from policy.tools.schemas import dump_input
from policy.urls import parse_web_url


@dataclass(frozen=True)
class Validation:
    """Outcome of validation: ``ok`` or a model-readable message (maybe just ``ask``)."""

    ok: bool
    tool_input: dict[str, Any]
    message: str = ""
    ask: bool = False


@dataclass(frozen=True)
class Disk:
    """The agent's disk as it reported it: where calls resolve and what exists there."""

    cwd: str
    home: str | None = None
    facts: AgentFacts = NO_FACTS

    def _lexical(self, path: str) -> str | None:
        if self.home is None and names_home(path):
            return None
        return lexical_path(path, self.cwd or "/", self.home or "/")

    def exists(self, path: str) -> bool | None:
        lexical = self._lexical(path)
        return None if lexical is None else self.facts.exists(lexical)

    def is_dir(self, path: str) -> bool | None:
        lexical = self._lexical(path)
        return None if lexical is None else self.facts.is_dir(lexical)


def validate(spec: ToolSpec, raw: object, disk: Disk) -> Validation:
    """Run the schema phase, then the semantic phase only if the schema passed."""
    if not isinstance(raw, dict):
        return Validation(False, {}, _error(spec.name, "tool_input must be an object"))
    if spec.schema is None:
        return _validate_recorded(spec, raw)
    try:
        model = spec.schema.model_validate(raw)
    except ValidationError as exc:
        return Validation(False, dict(raw), _error(spec.name, _format(exc)))
    tool_input = dump_input(model)
    check = _SEMANTIC.get(spec.name)
    if check is None:
        return Validation(True, tool_input)
    problem = check(tool_input, disk)
    if problem is None:
        return Validation(True, tool_input)
    message, ask = problem
    if ask:
        return Validation(True, tool_input, message, ask=True)
    return Validation(False, tool_input, _error(spec.name, message))


def _validate_recorded(spec: ToolSpec, raw: dict[str, Any]) -> Validation:
    """Against the schema Claude Code sent for the tool (an unknown tool has none: any object)."""
    found = problems(spec.json_schema, raw) if spec.json_schema is not None else []
    if found:
        return Validation(False, dict(raw), _error(spec.name, "; ".join(found[:5])))
    return Validation(True, dict(raw))


def _error(tool: str, detail: str) -> str:
    # Claude Code wraps validation failures in this tag so the model retries sensibly.
    return f"<tool_use_error>InputValidationError: {tool} failed: {detail}</tool_use_error>"


def _format(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "input"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


Problem = tuple[str, bool] | None


# "Does not exist" and "is a directory" are errors only when the agent said so: a
# file the server cannot see is not a missing file (the call runs on the agent).


def _check_edit(tool_input: dict[str, Any], disk: Disk) -> Problem:
    old, new = tool_input["old_string"], tool_input["new_string"]
    if old == new:
        return ("No changes to make: old_string and new_string are exactly the same.", False)
    if disk.is_dir(tool_input["file_path"]) is True:
        return (f"{tool_input['file_path']} is a directory, not a file.", False)
    if old and disk.exists(tool_input["file_path"]) is False:
        return (
            f"File does not exist: {tool_input['file_path']}. "
            "Use Write to create a new file, or pass an empty old_string.",
            False,
        )
    return None


def _check_multiedit(tool_input: dict[str, Any], disk: Disk) -> Problem:
    for index, edit in enumerate(tool_input["edits"]):
        if edit["old_string"] == edit["new_string"]:
            return (f"edits[{index}]: old_string and new_string are the same.", False)
    if tool_input["edits"][0]["old_string"] and disk.exists(tool_input["file_path"]) is False:
        return (f"File does not exist: {tool_input['file_path']}.", False)
    return None


def _check_write(tool_input: dict[str, Any], disk: Disk) -> Problem:
    if disk.is_dir(tool_input["file_path"]) is True:
        return (f"{tool_input['file_path']} is a directory, not a file.", False)
    return None


def _check_notebook(tool_input: dict[str, Any], disk: Disk) -> Problem:
    if not tool_input["notebook_path"].endswith(".ipynb"):
        return ("notebook_path must be a Jupyter notebook (.ipynb).", False)
    return None


def _check_read(tool_input: dict[str, Any], disk: Disk) -> Problem:
    if not tool_input["file_path"].strip():
        return ("file_path must not be empty.", False)
    return None


def _check_bash(tool_input: dict[str, Any], disk: Disk) -> Problem:
    if not tool_input["command"].strip():
        return ("command must not be empty.", False)
    return None


def _check_webfetch(tool_input: dict[str, Any], disk: Disk) -> Problem:
    # Parsed as the fetcher parses it (WHATWG); the private-address check is the
    # tool's own safety check (policy.pipeline.toolcheck), not a validation error.
    parsed = parse_web_url(tool_input["url"])
    if parsed is None or parsed.scheme not in ("http", "https"):
        return ("url must be a fully-formed http(s) URL.", False)
    return None


_SEMANTIC: dict[str, Callable[[dict[str, Any], Disk], Problem]] = {
    "Bash": _check_bash,
    "Edit": _check_edit,
    "MultiEdit": _check_multiedit,
    "Write": _check_write,
    "NotebookEdit": _check_notebook,
    "Read": _check_read,
    "WebFetch": _check_webfetch,
}
