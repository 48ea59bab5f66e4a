"""The calls that show whether Claude Code asks before a tool runs.

Each tool gets a minimal valid input built from its recorded ``input_schema`` (required
keys only, the first enum value, the smallest number), or a hand-written one where that
would not show a permission check: a path tool is tried inside the project and outside it,
a shell tool with a command that writes. ``{project}`` and ``{outside}`` stand for the run's
temporary project and a directory outside it.

Every input is harmless if Claude Code runs it: paths are under the run's temporary
directory, and nothing reaches the internet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.fakes import mcp_stdio


@dataclass(frozen=True)
class Probe:
    """One call to try, after the calls that set it up in the same session.

    ``takes`` fills input keys from the result of the last call before it: ``(key, pattern)``
    sets ``key`` to the pattern's first group (CronDelete deletes the job CronCreate made).
    """

    input: dict[str, Any]
    before: tuple[tuple[str, dict[str, Any]], ...] = ()
    takes: tuple[tuple[str, str], ...] = ()

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"input": self.input}
        if self.before:
            shown["before"] = [{"tool": name, "input": tool_input} for name, tool_input in self.before]
        if self.takes:
            shown["takes"] = dict(self.takes)
        return shown


QUESTION = {
    "question": "Which one?",
    "header": "Pick",
    "options": [{"label": "A", "description": "the first"}, {"label": "B", "description": "the second"}],
    "multiSelect": False,
}

# A background task to stop: Monitor runs ``sleep`` without asking and prints the task's id.
SLEEPER = ("Monitor", {"description": "probe", "timeout_ms": 60000, "command": "sleep 30"})
TASK_ID = r"task (\w+)"
AGENT = {"description": "Probe", "prompt": "Answer done.", "subagent_type": "general-purpose"}
PROBE_DICTS: dict[str, list[dict[str, Any]]] = {
    "Bash": [{"command": "touch probe.txt"}],
    "PowerShell": [{"command": "New-Item probe.txt"}],
    "Read": [{"file_path": "{project}/README.md"}, {"file_path": "{outside}/data.txt"}],
    "Glob": [{"pattern": "*.md"}, {"pattern": "*.txt", "path": "{outside}"}],
    "Grep": [{"pattern": "readme"}, {"pattern": "data", "path": "{outside}"}],
    "Write": [{"file_path": "{project}/probe.txt", "content": "probe\n"}],
    "Edit": [{"file_path": "{project}/README.md", "old_string": "readme a", "new_string": "readme b"}],
    "WebFetch": [{"url": "https://example.com/", "prompt": "Summarise."}],
    "Agent": [AGENT],
    "AskUserQuestion": [{"questions": [QUESTION]}],
    "Skill": [{"skill": "dataviz"}],
    "ToolSearch": [{"query": "select:WebFetch"}],
    # Monitor runs a shell command: a read-only one and one that writes.
    "Monitor": [
        {"description": "probe", "timeout_ms": 1000, "command": "echo probe"},
        {"description": "probe", "timeout_ms": 1000, "command": "touch probe.txt"},
    ],
    "ScheduleWakeup": [{"delaySeconds": 60, "reason": "probe", "prompt": "probe", "noop": True}],
    "CronCreate": [{"cron": "0 0 1 1 *", "prompt": "probe", "recurring": False}],
    "ReportFindings": [{"findings": []}],
    "SendMessage": [{"to": "nobody", "message": "probe"}],
    "SendUserMessage": [{"message": "probe", "status": "normal"}],
    "TaskCreate": [{"subject": "probe", "description": "probe"}],
    "TaskGet": [{"taskId": "1"}],
    "TaskUpdate": [{"taskId": "1", "status": "completed"}],
    "TodoWrite": [{"todos": [{"content": "probe", "status": "pending", "activeForm": "Probing"}]}],
    "ReadMcpResourceTool": [{"server": mcp_stdio.NAME, "uri": mcp_stdio.RESOURCE_URI}],
    "ReadMcpResourceDirTool": [{"server": mcp_stdio.NAME, "uri": mcp_stdio.RESOURCE_URI}],
    "Workflow": [{"name": "deep-research", "args": "probe"}],
}

# Tools that only run on something an earlier call made (a job, a task, a mode).
CHAINED: dict[str, Probe] = {
    "CronDelete": Probe(
        {"id": ""},
        before=(("CronCreate", {"cron": "0 0 1 1 *", "prompt": "probe", "recurring": False}),),
        takes=(("id", TASK_ID),),
    ),
    "TaskStop": Probe({"task_id": ""}, before=(SLEEPER,), takes=(("task_id", TASK_ID),)),
    # Claude Code edits only what the session has read.
    "NotebookEdit": Probe(
        {"notebook_path": "{project}/notes.ipynb", "new_source": "x = 1", "edit_mode": "insert", "cell_type": "code"},
        before=(("Read", {"file_path": "{project}/notes.ipynb"}),),
    ),
    "ExitPlanMode": Probe({}, before=(("EnterPlanMode", {}),)),
    "ExitWorktree": Probe({"action": "keep"}, before=(("EnterWorktree", {}),)),
}


# Rules beyond the tool's own name worth knowing about: (probe index, behavior, rule).
# Monitor runs a shell command, and Claude Code checks it as a Bash command.
MORE_RULES: dict[str, list[tuple[int, str, str]]] = {
    "Monitor": [(1, "allow", "Bash(touch:*)"), (1, "allow", "Bash"), (1, "deny", "Bash(touch:*)"), (1, "deny", "Bash")],
}

# Names Gatehouse or older CLIs used: is each still a tool name, and for which tool?
OLD_NAMES: dict[str, tuple[str, Probe]] = {
    "Task": ("Agent", Probe(AGENT)),
    "KillShell": ("TaskStop", Probe({"shell_id": ""}, before=(SLEEPER,), takes=(("shell_id", TASK_ID),))),
    "KillBash": ("TaskStop", Probe({"shell_id": ""}, before=(SLEEPER,), takes=(("shell_id", TASK_ID),))),
    "BashOutput": ("", Probe({"bash_id": "probe"})),
    "LS": ("", Probe({"path": "{project}"})),
    "MultiEdit": ("", Probe({"file_path": "{project}/README.md", "edits": [{"old_string": "a", "new_string": "b"}]})),
    "SlashCommand": ("", Probe({"command": "/help"})),
}


def probes(name: str, schema: dict[str, Any]) -> list[Probe]:
    """The calls to try for one tool."""
    if name in CHAINED:
        return [CHAINED[name]]
    return [Probe(tool_input) for tool_input in PROBE_DICTS.get(name) or [minimal(schema)]]


def minimal(schema: dict[str, Any]) -> Any:
    """The smallest value ``schema`` accepts, as far as a probe needs one."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "anyOf" in schema:
        return minimal(schema["anyOf"][0])
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties") or {}
        return {key: minimal(properties.get(key, {})) for key in schema.get("required") or []}
    if kind == "array":
        return [minimal(schema.get("items") or {}) for _ in range(int(schema.get("minItems") or 0))]
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return "probe"
