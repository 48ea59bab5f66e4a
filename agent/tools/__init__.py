"""The tools the agent-side runner ships: one small class each, one interface (`Tool`)."""

from agent.tools.base import InputCheck, ProgressCallback, Tool, ToolContext, ToolError, ToolOutput
from agent.tools.bash import BashOutputTool, BashTool, KillShellTool
from agent.tools.files import EditTool, ReadTool, WriteTool
from agent.tools.search import GlobTool, GrepTool


def default_tools() -> list[Tool]:
    """Return fresh instances of every built-in tool."""
    return [BashTool(), BashOutputTool(), KillShellTool(), ReadTool(), WriteTool(), EditTool(), GlobTool(), GrepTool()]


__all__ = [
    "BashOutputTool",
    "BashTool",
    "EditTool",
    "GlobTool",
    "GrepTool",
    "InputCheck",
    "KillShellTool",
    "ProgressCallback",
    "ReadTool",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "WriteTool",
    "default_tools",
]
