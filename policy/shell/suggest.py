"""Suggest the rule an approver can save for "always allow"."""

from __future__ import annotations

from collections.abc import Sequence

from policy.shell.commands import SimpleCommand

# CLIs whose first word says little: ``git`` alone would allow ``git push --force``.
MULTI_WORD_CLIS = frozenset(
    {
        "git",
        "npm",
        "yarn",
        "pnpm",
        "bun",
        "cargo",
        "go",
        "docker",
        "kubectl",
        "pip",
        "pip3",
        "uv",
        "poetry",
        "gh",
        "terraform",
        "brew",
        "apt",
        "apt-get",
        "systemctl",
        "dotnet",
        "mvn",
        "gradle",
        "helm",
        "aws",
        "gcloud",
        "az",
        "composer",
        "bundle",
        "rails",
        "mix",
        "deno",
        "conda",
        "make",
        "just",
        "npx",
        "pytest",
        "python",
        "python3",
        "node",
        "ruby",
        "php",
        "rake",
        "swift",
    }
)
# ``npm run test``: the script name is what the approver is deciding about.
RUN_VERBS = frozenset({"run", "exec", "x", "run-script"})
_PACKAGE_RUNNERS = frozenset({"npm", "yarn", "pnpm", "bun", "uv", "poetry", "deno"})


def suggested_prefix(command: SimpleCommand) -> str | None:
    """Return the command prefix worth remembering, e.g. ``npm run test``."""
    words = list(command.words)
    if not words or command.dynamic_name:
        return None
    head = [words[0]]
    if command.name in MULTI_WORD_CLIS:
        take = 3 if len(words) > 2 and words[1] in RUN_VERBS and (command.name in _PACKAGE_RUNNERS) else 2
        for word in words[1:take]:
            if word.startswith("-") or not _plain(word):
                break
            head.append(word)
    return " ".join(head) if all(_plain(w) for w in head) else None


def _plain(word: str) -> bool:
    return bool(word) and word.isascii() and not any(c in word for c in "()*\\ \t\n\"'")


def suggested_rules(commands: Sequence[SimpleCommand]) -> list[str]:
    rules: list[str] = []
    for command in commands:
        prefix = suggested_prefix(command)
        if prefix is None:
            return []
        rule = f"Bash({prefix}:*)"
        if rule not in rules:
            rules.append(rule)
    return rules
