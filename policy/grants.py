"""The rule a person's "Allow for session" / "Always allow" saves: never wider than the call.

A grant made with one tap must not become a team-wide allow-everything: the bare rule
`Bash` once came from a card with no suggestion. So a grant is
- a prefix rule only when the command is one plain simple command with a safe prefix
  (a CLI and its subcommand: `Bash(npm run test:*)`, `Bash(git status:*)`),
- otherwise the exact command (`Bash(ls -la)`), which matches that command alone,
- for other tools the engine's one narrow suggestion (one file, one domain, one MCP tool),
- and nothing at all (allow once only) when none of these can be written exactly.
A tool-wide rule is never a grant: an admin types it on the rules page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policy.rules import RuleSyntaxError, parse_rule

# Characters a plain command never has: shell operators, expansions, quoting, globs, and
# the rule syntax's own wildcard and escape. A command with any of them is granted exactly.
SHELL_SPECIAL = frozenset(";&|<>`$(){}[]*?!#~\\'\"\n\r\t%^")
# Words after which the rest of the line is a program to run: a prefix grant on them
# would allow any program (`python -c`, `bash -c`, `env rm`, `xargs rm`).
RUNS_ITS_ARGUMENTS = frozenset(
    {
        "bash",
        "sh",
        "zsh",
        "dash",
        "fish",
        "ksh",
        "env",
        "sudo",
        "doas",
        "su",
        "xargs",
        "exec",
        "eval",
        "command",
        "builtin",
        "nohup",
        "timeout",
        "nice",
        "time",
        "watch",
        "python",
        "python3",
        "node",
        "ruby",
        "perl",
        "php",
        "deno",
        "bun",
        "npx",
        "bunx",
        "uvx",
        "pipx",
        "busybox",
        "find",
        "awk",
        "sed",
    }
)
# Two-word prefixes that themselves run or configure arbitrary programs.
UNSAFE_PREFIXES = frozenset(
    {
        "git config",
        "npm exec",
        "npm x",
        "pnpm exec",
        "pnpm dlx",
        "yarn exec",
        "yarn dlx",
        "docker run",
        "docker exec",
        "kubectl exec",
        "go run",
        "cargo run",
        "uv run",
        "poetry run",
        "make -f",
    }
)
MIN_PREFIX_WORDS = 2
# A rule must fit on a phone's card verbatim, beside the input; a longer command is
# allowed once (a repeat of it word for word is rare anyway).
MAX_GRANT_CHARS = 300
PATH_GLOB = frozenset("*?[]{}!\\")


def grant_rule(
    tool_name: str, tool_input: Mapping[str, Any], suggested_rules: Sequence[str], *, destructive: bool = False
) -> str | None:
    """The rule to save for this call, or None when only "Allow once" is possible.

    - `destructive`: the engine warned about the call; it is never remembered.
    """
    if destructive:
        return None
    if tool_name == "Bash":
        command = tool_input.get("command")
        return bash_grant(command, suggested_rules) if isinstance(command, str) else None
    rule = _narrow_suggestion(tool_name, suggested_rules)
    return rule if rule is not None and len(rule) <= MAX_GRANT_CHARS else None


def bash_grant(command: str, suggested_rules: Sequence[str]) -> str | None:
    """`Bash(prefix:*)` for a plain command with a safe prefix, else `Bash(<command>)`."""
    if not command or command != command.strip() or not command.isprintable() or len(command) > MAX_GRANT_CHARS:
        return None
    prefix = _safe_prefix(command, suggested_rules)
    if prefix is not None:
        return f"Bash({prefix}:*)"
    return _exact_rule(command)


def _safe_prefix(command: str, suggested_rules: Sequence[str]) -> str | None:
    if len(suggested_rules) != 1 or any(char in SHELL_SPECIAL for char in command):
        return None
    rule = suggested_rules[0]
    if not (rule.startswith("Bash(") and rule.endswith(":*)")):
        return None
    prefix_words = rule[len("Bash(") : -len(":*)")].split(" ")
    words = command.split(" ")
    if len(prefix_words) < MIN_PREFIX_WORDS or words[: len(prefix_words)] != prefix_words:
        return None
    if any(not word or word.startswith("-") or any(c in SHELL_SPECIAL for c in word) for word in prefix_words):
        return None
    prefix = " ".join(prefix_words)
    if prefix_words[0] in RUNS_ITS_ARGUMENTS or " ".join(prefix_words[:2]) in UNSAFE_PREFIXES:
        return None
    return prefix


def _exact_rule(command: str) -> str | None:
    """`Bash(<command>)` when the rule syntax can say exactly this command, else None."""
    if "*" in command or "\\" in command or command.endswith(":*"):
        return None  # a wildcard or an escape would make the rule mean something else
    text = f"Bash({command})"
    try:
        parsed = parse_rule(text)
    except RuleSyntaxError:
        return None
    if parsed.content != command:
        return None
    return str(parsed)


def _narrow_suggestion(tool_name: str, suggested_rules: Sequence[str]) -> str | None:
    """The engine's one suggestion when it names one file, one domain or one MCP tool."""
    if len(suggested_rules) != 1:
        return None
    try:
        parsed = parse_rule(suggested_rules[0])
    except RuleSyntaxError:
        return None
    if parsed.content is None:
        # A bare name is a whole tool; only an MCP tool's full name is one operation.
        return str(parsed) if parsed.is_mcp and parsed.tool_name.count("__") >= 2 else None
    content = parsed.content.strip()
    if parsed.tool_name in ("Edit", "Read", "Write") and content.startswith("//"):
        return None if any(char in PATH_GLOB for char in content) else str(parsed)
    if parsed.tool_name == "WebFetch" and content.startswith("domain:"):
        host = content[len("domain:") :]
        return str(parsed) if host and "*" not in host and "\\" not in host else None
    return None
