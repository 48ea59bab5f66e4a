#!/usr/bin/env python
"""Django's command-line utility for Gatehouse."""

import os
import sys

# Commands whose `--settings` is Claude Code's settings file. Django reads any
# `--settings` on the command line as its settings module before it loads a command,
# so for these it is renamed here, before anything parses it.
CLAUDE_SETTINGS_COMMANDS = ("install_claude_hooks",)


def claude_settings_argv(argv: list[str]) -> list[str]:
    """`--settings FILE` as the command's `--claude-settings FILE` for the commands above."""
    if len(argv) < 2 or argv[1] not in CLAUDE_SETTINGS_COMMANDS:
        return argv
    renamed = argv[:2]
    for word in argv[2:]:
        if word == "--settings":
            word = "--claude-settings"
        elif word.startswith("--settings="):
            word = "--claude-settings=" + word[len("--settings=") :]
        renamed.append(word)
    return renamed


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatehouse.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(claude_settings_argv(sys.argv))


if __name__ == "__main__":
    main()
