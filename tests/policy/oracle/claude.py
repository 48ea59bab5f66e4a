"""Run one (mode, setting) batch of calls through the real Claude Code CLI's permission system.

The CLI runs in print mode with no hooks, in the SDK's stdio mode (`--input-format
stream-json --output-format stream-json --permission-prompt-tool stdio`), so an ask
arrives as a `can_use_tool` control request (answered with a deny: nothing asked runs),
and an allow or a deny shows in the `tool_result`'s `permission_decision`. The model is
a fake Anthropic API on 127.0.0.1 that makes the batch's calls one after another.

Everything here runs inside a private mount namespace (``in_sandbox``): a tmpfs over
``/srv`` holds the layout, and a fake ``rm`` is bind-mounted over the real one, so a
critical-path ``rm -rf ~`` that Claude Code lets through deletes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

from tests.e2e.claude_code.cli import claude_bin
from tests.fakes.anthropic_stream import ScriptedToolUse, fake_anthropic_calls
from tests.policy.calls import gather
from tests.policy.oracle.cases import HOME, LAYOUT, PROJECT, ROOT, Call, Setting

FAKE_RM = "#!/bin/sh\n# gatehouse-oracle fake rm: deletes nothing\nexit 0\n"
BIN_DIR = f"{ROOT}/.oracle"
TOOLS = "Bash,Read,Edit,Write,Glob,Grep,WebFetch,NotebookEdit"
BATCH_TIMEOUT = 300.0


def enter_sandbox() -> None:
    """Mount the tmpfs and the fake ``rm``; call only inside ``unshare --mount``."""
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", ROOT], check=True)
    os.makedirs(BIN_DIR)
    fake = Path(BIN_DIR) / "rm"
    fake.write_text(FAKE_RM)
    fake.chmod(0o755)
    real = os.path.realpath(shutil.which("rm") or "/usr/bin/rm")
    subprocess.run(["mount", "--bind", str(fake), real], check=True)
    check_sandbox()


def check_sandbox() -> None:
    """Refuse to run a single call unless the layout is a tmpfs and ``rm`` is the fake."""
    real = os.path.realpath(shutil.which("rm") or "/usr/bin/rm")
    if not os.path.ismount(ROOT) or "gatehouse-oracle fake rm" not in Path(real).read_text(errors="replace"):
        raise RuntimeError(f"not in the oracle's mount namespace ({ROOT} a tmpfs, {real} the fake rm)")


def build_layout() -> None:
    """A fresh copy of the layout (each batch starts from the same files)."""
    check_sandbox()
    for entry in os.scandir(ROOT):
        if entry.path != BIN_DIR:
            shutil.rmtree(entry.path)
    for path, content in LAYOUT.items():
        if content is None:
            os.makedirs(path, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(content, tuple):
            os.symlink(content[1], path)
        else:
            Path(path).write_text(content)


def call_facts(call: Call, setting: Setting) -> dict[str, Any]:
    """What Gatehouse's hook would report for this call on this machine."""
    return gather(call.tool, call.input, PROJECT, setting.add_dirs, HOME)


def _reset_cwd_after(call: Call) -> bool:
    # Claude Code keeps a `cd` for the next command: move back so every case starts in PROJECT.
    return call.tool == "Bash" and "cd " in str(call.input.get("command", ""))


def _script(calls: list[Call]) -> tuple[list[ScriptedToolUse], dict[str, str]]:
    script, ids = [], {}
    for call in calls:
        use = ScriptedToolUse(call.tool, call.input)
        script.append(use)
        ids[use.id] = call.id
        if _reset_cwd_after(call):
            script.append(ScriptedToolUse("Bash", {"command": f"cd {PROJECT}"}))
    return script, ids


def _env(api_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "GATEHOUSE_"))}
    env.update(
        HOME=HOME,
        CLAUDE_CONFIG_DIR=f"{HOME}/.claude",
        ANTHROPIC_BASE_URL=api_url,
        ANTHROPIC_API_KEY="test",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        # bypassPermissions as root needs it; the layout is a throwaway tmpfs.
        IS_SANDBOX="1",
        # An allowed WebFetch goes nowhere: only 127.0.0.1 answers.
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


def settings_document(setting: Setting) -> dict[str, Any]:
    return {"permissions": setting.permissions(), "skipWebFetchPreflight": True, "useAutoModeDuringPlan": False}


def command(mode: str, setting: Setting, settings_path: str) -> list[str]:
    args = [claude_bin(), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    args += ["--permission-prompt-tool", "stdio", "--settings", settings_path, "--permission-mode", mode]
    args += ["--tools", TOOLS]
    for directory in setting.add_dirs:
        args += ["--add-dir", directory]
    return args


def run_batch(mode: str, setting: Setting, calls: list[Call]) -> dict[str, dict[str, Any]]:
    """Claude Code's outcome for each call: ``{"behavior": allow|ask|deny|error, ...}``."""
    check_sandbox()
    script, ids = _script(calls)
    settings_path = f"{BIN_DIR}/settings-{mode}-{setting.name}.json"
    Path(settings_path).write_text(json.dumps(settings_document(setting)))
    with fake_anthropic_calls(script) as api:
        process = subprocess.Popen(
            command(mode, setting, settings_path),
            cwd=PROJECT,
            env=_env(api.url),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        watchdog = threading.Timer(BATCH_TIMEOUT, process.kill)
        watchdog.start()
        try:
            outcomes = _converse(process, ids)
        finally:
            watchdog.cancel()
            process.kill()
            stderr = process.stderr.read() if process.stderr else ""
            process.wait()
    missing = [ids[i] for i in ids if ids[i] not in outcomes]
    if missing:
        raise RuntimeError(f"{mode}/{setting.name}: no outcome for {missing[:5]} (stderr: {stderr[-2000:]})")
    return outcomes


def _send(stdin: IO[str], message: dict[str, Any]) -> None:
    stdin.write(json.dumps(message) + "\n")
    stdin.flush()


def _converse(process: subprocess.Popen[str], ids: dict[str, str]) -> dict[str, dict[str, Any]]:
    assert process.stdin is not None and process.stdout is not None
    user = {"role": "user", "content": "Make the calls."}
    _send(process.stdin, {"type": "user", "message": user, "parent_tool_use_id": None, "session_id": ""})
    outcomes: dict[str, dict[str, Any]] = {}
    for line in process.stdout:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        kind = message.get("type")
        if kind == "control_request":
            answer_control(process.stdin, message, ids, outcomes)
        elif kind == "user":
            read_results(message, ids, outcomes)
        elif kind == "result":
            break
    process.stdin.close()
    return outcomes


def answer_control(
    stdin: IO[str], message: dict[str, Any], ids: dict[str, str], outcomes: dict[str, dict[str, Any]]
) -> None:
    request = message.get("request") or {}
    answer: dict[str, Any] = {}
    if request.get("subtype") == "can_use_tool":
        call = ids.get(str(request.get("tool_use_id")))
        if call is not None:
            outcomes[call] = {
                "behavior": "ask",
                "reason_type": request.get("decision_reason_type"),
                "reason": request.get("decision_reason"),
            }
        # Deny every ask: nothing Claude Code would have asked about runs.
        answer = {"behavior": "deny", "message": "asked"}
    response = {"subtype": "success", "request_id": message.get("request_id"), "response": answer}
    _send(stdin, {"type": "control_response", "response": response})


def read_results(message: dict[str, Any], ids: dict[str, str], outcomes: dict[str, dict[str, Any]]) -> None:
    texts = {}
    content = (message.get("message") or {}).get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            texts[block.get("tool_use_id")] = _text(block.get("content"))
    for meta in message.get("tool_result_meta") or []:
        call = ids.get(str(meta.get("id")))
        if call is None or call in outcomes:
            continue
        decision = meta.get("permission_decision") or {}
        if decision.get("decision") == "accept":
            outcomes[call] = {"behavior": "allow", "reason_type": decision.get("reason_type")}
        elif decision.get("decision") == "reject":
            reason = texts.get(meta.get("id"), "")[:300]
            outcomes[call] = {"behavior": "deny", "reason_type": decision.get("reason_type"), "reason": reason}
        else:
            outcomes[call] = {"behavior": "error", "message": texts.get(meta.get("id"), "")[:300]}
    for use_id, text in texts.items():
        call = ids.get(str(use_id))
        if call is not None and call not in outcomes:
            outcomes[call] = {"behavior": "error", "message": text[:300]}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""
