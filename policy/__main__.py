"""``python -m policy decide`` (stdin JSON → decision JSON) and ``python -m policy lint``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from policy.lint import lint_rules
from policy.pipeline import decide


def _decide() -> int:
    raw = sys.stdin.read()
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        print(f"policy decide: stdin is not valid JSON: {exc}", file=sys.stderr)
        return 2
    if isinstance(doc, dict) and "facts" not in doc:
        doc["facts"] = _own_facts(doc)
    print(json.dumps(decide(doc).to_dict(), indent=2, ensure_ascii=False))
    return 0


def _own_facts(doc: dict[str, Any]) -> dict[str, Any] | None:
    """This command runs on the agent's machine: report its own disk, as a hook would."""
    from agent.facts import gather  # reads the disk, so it lives outside the engine

    tool_input = doc.get("tool_input")
    directories = doc.get("additional_directories")
    cwd = doc.get("cwd")
    home = doc.get("home")
    return gather(
        str(doc.get("tool_name")),
        tool_input if isinstance(tool_input, dict) else {},
        cwd if isinstance(cwd, str) else "",
        [d for d in directories if isinstance(d, str)] if isinstance(directories, list) else [],
        home if isinstance(home, str) and home else None,
    )


def _lint(paths: Sequence[str], source: str) -> int:
    found = 0
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                doc: Any = json.load(handle)
        except (OSError, json.JSONDecodeError) as exc:
            print(f"{path}: error: {exc}")
            found += 1
            continue
        if not isinstance(doc, dict):
            print(f"{path}: error: a settings file must be a JSON object")
            found += 1
            continue
        doc = {**doc, "source": doc.get("source", source)} if "permissions" in doc else doc
        findings = lint_rules([doc]) if "permissions" in doc else []
        for finding in findings:
            print(f"{path}: {finding}")
        found += len(findings)
    if not found:
        print(f"{len(paths)} file(s) checked, no findings")
    return 1 if found else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policy", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("decide", help="read one request as JSON on stdin, print the decision")
    lint = commands.add_parser("lint", help="lint Claude Code settings files")
    lint.add_argument("files", nargs="+")
    lint.add_argument(
        "--source",
        default="projectSettings",
        help="source to assume for files that do not say (default projectSettings)",
    )
    args = parser.parse_args(argv)
    if args.command == "decide":
        return _decide()
    return _lint(args.files, args.source)


if __name__ == "__main__":
    sys.exit(main())
