"""Input schemas of Claude Code's built-in tools (phase one of validation)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class StrictInput(BaseModel):
    """Built-in tools reject unknown keys, like Claude Code's strict zod objects."""

    model_config = ConfigDict(extra="forbid")


class LaxInput(BaseModel):
    """Tools whose option set grows release by release keep unknown keys."""

    model_config = ConfigDict(extra="allow")


class BashInput(StrictInput):
    command: str
    timeout: int | None = Field(default=None, ge=0, le=600_000)
    description: str | None = None
    run_in_background: bool | None = None
    dangerouslyDisableSandbox: bool | None = None


class ReadInput(StrictInput):
    file_path: str
    offset: int | None = Field(default=None, ge=0)
    limit: int | None = Field(default=None, ge=0)
    pages: str | None = None
    allow_large: bool | None = None


class WriteInput(StrictInput):
    file_path: str
    content: str


class EditInput(StrictInput):
    file_path: str
    old_string: str
    new_string: str
    replace_all: bool = False


class SingleEdit(StrictInput):
    old_string: str
    new_string: str
    replace_all: bool = False


class MultiEditInput(StrictInput):
    file_path: str
    edits: list[SingleEdit] = Field(min_length=1)


class NotebookEditInput(StrictInput):
    notebook_path: str
    new_source: str
    cell_id: str | None = None
    cell_type: Literal["code", "markdown"] | None = None
    edit_mode: Literal["replace", "insert", "delete"] | None = None


class GlobInput(StrictInput):
    pattern: str
    path: str | None = None


class GrepInput(LaxInput):
    pattern: str
    path: str | None = None
    glob: str | None = None


class LsInput(StrictInput):
    path: str
    ignore: list[str] | None = None


class WebFetchInput(StrictInput):
    url: str
    prompt: str
    offset: int | None = Field(default=None, ge=0)


class WebSearchInput(StrictInput):
    query: str = Field(min_length=2)
    allowed_domains: list[str] | None = None
    blocked_domains: list[str] | None = None


class TaskInput(LaxInput):
    description: str
    prompt: str
    subagent_type: str | None = None


class TodoItem(LaxInput):
    content: str
    status: Literal["pending", "in_progress", "completed"]


class TodoWriteInput(StrictInput):
    todos: list[TodoItem]


class KillShellInput(StrictInput):
    shell_id: str


class BashOutputInput(StrictInput):
    bash_id: str
    filter: str | None = None


class ExitPlanModeInput(LaxInput):
    plan: str | None = None


class QuestionOption(LaxInput):
    label: str
    description: str = ""


class Question(LaxInput):
    question: str
    header: str = ""
    options: list[QuestionOption]
    multiSelect: bool = False  # Claude Code's field name


class AskUserQuestionInput(LaxInput):
    questions: list[Question]


class SkillInput(LaxInput):
    skill: str


class SlashCommandInput(LaxInput):
    command: str


class McpInput(LaxInput):
    """MCP tools bring their own schemas; the gateway passes any object through."""


def dump_input(model: BaseModel) -> dict[str, Any]:
    """Return the coerced input with the keys the caller sent (plus extras)."""
    return model.model_dump(exclude_unset=True)
