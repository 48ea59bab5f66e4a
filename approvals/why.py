"""Why a call was asked, in words a person reads in a second, from the engine's stored result.

The engine stores its verdict, reason and trace with each request (`evaluation`). A
card turns the decisive step into one sentence ("no rule allows `npm publish`; nearest
rule `Bash(npm run test:*)`"), made of plain text and code parts that the card escapes.
Nothing here imports Django: it is data in, words out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from policy.urls import parse_web_url, private_reason

# A part of a sentence: ("text", words) or ("code", something to show verbatim).
Part = tuple[str, str]
SUBJECT_CHARS = 80
PATH_KEYS = ("file_path", "notebook_path", "path")


def subject(tool_name: str, tool_input: Any) -> str:
    """What the call acts on, short: the command's first line, the path, the URL."""
    data = tool_input if isinstance(tool_input, dict) else {}
    text = ""
    if tool_name == "Bash" and isinstance(data.get("command"), str):
        text = next((line.strip() for line in data["command"].split("\n") if line.strip()), "")
    elif tool_name == "WebFetch" and isinstance(data.get("url"), str):
        text = data["url"]
    else:
        text = next((str(data[key]) for key in PATH_KEYS if isinstance(data.get(key), str)), tool_name)
    return text if len(text) <= SUBJECT_CHARS else text[: SUBJECT_CHARS - 1] + "…"


def why_asked(evaluation: dict[str, Any], tool_name: str, tool_input: Any) -> list[Part]:
    """The decisive step of the engine's evaluation as a sentence of parts."""
    stored = evaluation.get("reason")
    reason: dict[str, Any] = stored if isinstance(stored, dict) else {}
    kind = str(reason.get("type") or "")
    detail = str(reason.get("detail") or "")
    if kind == "rule":
        return _rule_words(reason)
    if kind == "hook":
        message = str(evaluation.get("message") or "")
        words: list[Part] = [("text", "the hook "), ("code", str(reason.get("hook") or "?")), ("text", " asked")]
        return words + ([("text", f": {message}")] if message else [])
    if kind == "classifier":
        return [("text", f"the {reason.get('classifier') or 'classifier'} classifier had no verdict")]
    if kind == "mode":
        return [("text", f"mode {reason.get('mode')}" + (f": {detail}" if detail else ""))]
    if kind == "safetyCheck":
        return [("text", "safety check: " + (detail or "a protected path"))]
    if detail == "no rule allows this call":
        return _no_rule_words(evaluation, tool_name, tool_input)
    for prefix in ("validation: ", "shell analysis: "):
        if detail.startswith(prefix):
            return [("text", (prefix if prefix.startswith("shell") else "") + detail[len(prefix) :])]
    text = detail or str(evaluation.get("message") or "")
    return [("text", text)] if text else []


def _rule_words(reason: dict[str, Any]) -> list[Part]:
    behavior = reason.get("behavior")
    verb = {"ask": "asks a person for", "deny": "denies", "allow": "allows"}.get(str(behavior), "matches")
    source = f" ({reason['source']})" if reason.get("source") else ""
    return [("text", "the rule "), ("code", str(reason.get("rule") or "")), ("text", f"{source} {verb} this call")]


def _no_rule_words(evaluation: dict[str, Any], tool_name: str, tool_input: Any) -> list[Part]:
    words: list[Part] = [("text", "no rule allows "), ("code", subject(tool_name, tool_input))]
    nearest = evaluation.get("nearest_rule")
    if isinstance(nearest, str) and nearest:
        words += [("text", "; nearest rule "), ("code", nearest)]
    return words


# --- the nearest allow rule -----------------------------------------------------------------


def nearest_allow_rule(tool_name: str, tool_input: Any, rules: Iterable[tuple[str, str]]) -> str | None:
    """The allow rule for this tool that comes closest to covering the call, if any is close.

    - `rules`: (rule text, behavior) pairs. Closeness: leading words shared with a Bash
      command, leading path segments shared with a file path, trailing labels shared
      with a fetched host. Nothing shared: None.
    """
    target = _comparable(tool_name, tool_input)
    if target is None:
        return None
    best: tuple[int, int, str] | None = None
    for text, behavior in rules:
        tool, content = _split_rule(text)
        if behavior != "allow" or tool != tool_name or content is None:
            continue
        shared = _shared(tool_name, target, content)
        if shared and (best is None or (shared, -len(text)) > best[:2]):
            best = (shared, -len(text), text)
    return best[2] if best else None


def _split_rule(text: str) -> tuple[str, str | None]:
    tool, paren, rest = text.partition("(")
    if not paren or not rest.endswith(")"):
        return text.strip(), None
    return tool.strip(), rest[:-1]


def _comparable(tool_name: str, tool_input: Any) -> list[str] | None:
    data = tool_input if isinstance(tool_input, dict) else {}
    if tool_name == "Bash" and isinstance(data.get("command"), str):
        return data["command"].split()
    if tool_name == "WebFetch" and isinstance(data.get("url"), str):
        parsed = parse_web_url(data["url"])
        return list(reversed(parsed.host.split("."))) if parsed is not None else None
    path = next((data[key] for key in PATH_KEYS if isinstance(data.get(key), str)), None)
    return [part for part in path.split("/") if part] if path else None


def _shared(tool_name: str, target: list[str], content: str) -> int:
    if tool_name == "Bash":
        words = content.removesuffix(":*").removesuffix("*").split()
    elif tool_name == "WebFetch":
        words = list(reversed(content.removeprefix("domain:").lstrip("*.").split(".")))
    else:
        words = [part for part in content.split("/") if part and part not in (".", "~", "**")]
    count = 0
    for mine, theirs in zip(target, words, strict=False):
        if mine != theirs:
            break
        count += 1
    return count


# --- WebFetch to this machine or the local network ------------------------------------------


def private_fetch_host(url: str) -> str | None:
    """The host of `url` when it names this machine or a private network, else None.

    - Read as the fetcher reads it, by the engine's own WHATWG parse (`policy.urls`).
    """
    parsed = parse_web_url(url)
    if parsed is None or private_reason(parsed) is None:
        return None
    return parsed.host
