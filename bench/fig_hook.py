"""Figure 4: the Claude Code hook command, end to end, beside curl and the interpreter floor.

Commands timed by hyperfine (or by our own loop when hyperfine is missing), each
answering one auto-decided PreToolUse call with a fresh `tool_use_id` (a replay would be
cheaper than a real call):
- the hook as the installers write it (`agent.install.launcher`: `python3 -I -S -c ...`):
  on a laptop, the bundle downloaded from the server (`GET /agent/gatehouse-hook.pyz`)
  and `install`ed, which adds the installing Python's bytecode to it; on the server's own
  machine, the checkout's `agent/hook.py` with its bytecode cached (`install_claude_hooks`),
- `python -m agent.hook --server URL < input.json`, bytecode cached (this machine sets
  PYTHONDONTWRITEBYTECODE, so the run compiles it first), for comparison with earlier runs,
- `curl --data-binary @input.json URL/hooks/claude-code` (the same JSON, no Python), and
  `curl file:///dev/null` (curl's own start), whose difference is the server's answer,
- `python3 -c pass` (the interpreter's floor) and `python3 -I -S -c pass` (the same, as
  the installed hooks start it: no `site`).
The goals: the installed hooks within 10 ms of the floor (issue 22's), and the bundle
within 15 ms of the floor plus the server's answer (this figure's first).
"""

from __future__ import annotations

import json
import os
import py_compile
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from agent.install import launcher
from bench.env import ROOT
from bench.stats import Figure, Row, percentile

TITLE = "Hook command, as installed"
BOTTLENECK = (
    "the server's answer and the interpreter, not the hook: installed, the hook starts without "
    "`site` or runpy and loads its bytecode (until the twenty-seventh pass the bundle compiled "
    "its modules and imported its installer on every run, 60 ms against 21 now); `-m` adds "
    "runpy (~14 M instructions). On a loaded machine every CPU millisecond costs several wall "
    "milliseconds, and the gap also swings with the server's answer time between runs"
)


def hook_input(cwd: str) -> dict[str, Any]:
    return {
        "session_id": "bench-hook-session",
        "transcript_path": "/tmp/bench-transcript.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "git status"},
        "tool_use_id": f"toolu_{uuid.uuid4().hex}",
    }


def bare_python3() -> str:
    """A real python3 binary: a pyenv shim on PATH is a shell script that costs ~200 ms."""
    system = Path("/usr/bin/python3")
    return str(system) if system.exists() else os.path.realpath(sys.executable)


def installed_bundle(server_url: str, work_dir: Path) -> str:
    """The hook command a laptop runs: the bundle downloaded from the server, `install`ed by
    the bare python3 (which adds that Python's bytecode to it: agent.install.add_bytecode),
    as the command `install` wrote into Claude Code's settings."""
    laptop = work_dir / "laptop"
    laptop.mkdir(parents=True, exist_ok=True)
    bundle = laptop / "gatehouse-hook.pyz"
    with urllib.request.urlopen(f"{server_url}/agent/gatehouse-hook.pyz", timeout=30) as response:
        bundle.write_bytes(response.read())
    settings = laptop / "settings.json"
    subprocess.run(
        [bare_python3(), str(bundle), "install", "--server", server_url, "--settings", str(settings)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return str(json.loads(settings.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"])


def commands(server_url: str, token: str, input_path: Path, bundle_command: str) -> dict[str, str]:
    python = shlex.quote(sys.executable)
    bare = shlex.quote(bare_python3())
    path = shlex.quote(str(input_path))
    # What `manage.py install_claude_hooks` writes on the server's own machine.
    checkout = shlex.join(launcher(bare_python3(), str(ROOT)))
    return {
        "floor": f"{bare} -c pass",
        "isolated_floor": f"{bare} -I -S -c pass",  # the interpreter as the installed hooks start it
        "venv_floor": f"{python} -c pass",
        # What `gatehouse-hook.pyz install` wrote into Claude Code's settings on a laptop.
        "bundle": f"{bundle_command} < {path}",
        "checkout": f"{checkout} --server {server_url} < {path}",
        # The hook is standard library only, so a bare python3 runs it (no venv site-packages).
        "hook": f"{bare} -m agent.hook --server {server_url} < {path}",
        "hook_venv": f"{python} -m agent.hook --server {server_url} < {path}",
        "curl_floor": "curl -sS file:///dev/null",
        "curl": (
            f"curl -sS -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' "
            f"--data-binary @{path} {server_url}/hooks/claude-code"
        ),
    }


def _refresh_input(input_path: Path) -> None:
    input_path.write_text(json.dumps(hook_input(str(ROOT))))


def _own_timing(cmds: dict[str, str], runs: int, input_path: Path, env: dict[str, str]) -> dict[str, Any]:
    """Round-robin over the commands, so drift in the machine's load hits them all alike."""
    results: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            _refresh_input(input_path)
            t0 = time.perf_counter()
            subprocess.run(cmd, shell=True, cwd=ROOT, env=env, capture_output=True, check=True)  # noqa: S602
            results[name].append(time.perf_counter() - t0)
    return results


def _hyperfine(
    cmds: dict[str, str], runs: int, rounds: int, input_path: Path, env: dict[str, str], work_dir: Path
) -> dict[str, Any]:
    """Several short hyperfine rounds, concatenated: hyperfine times one command's runs in a
    block, and on a shared machine a block can land in a busy spell; rounds spread each
    command over the whole measurement."""
    out = work_dir / "hyperfine.json"
    refresh = f"{shlex.quote(sys.executable)} -c {shlex.quote(_REFRESH_SNIPPET)} {shlex.quote(str(input_path))}"
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(rounds):
        args = [
            "hyperfine",
            "--export-json",
            str(out),
            "--runs",
            str(runs),
            "--warmup",
            "1",
            "--prepare",
            refresh,
            "--style",
            "none",
        ]
        for name, cmd in cmds.items():
            args += ["--command-name", name, cmd]
        subprocess.run(args, cwd=ROOT, env=env, check=True, capture_output=True, timeout=600)
        for entry in json.loads(out.read_text())["results"]:
            times[entry["command"]] += entry["times"]
    return times


# Run by hyperfine's --prepare before every timed run: a fresh tool_use_id, untimed.
_REFRESH_SNIPPET = (
    "import json,sys,uuid; p=sys.argv[1]; d=json.load(open(p)); "
    "d['tool_use_id']='toolu_'+uuid.uuid4().hex; json.dump(d, open(p,'w'))"
)


def _check_outputs(cmds: dict[str, str], input_path: Path, env: dict[str, str]) -> None:
    for name in ("bundle", "checkout", "hook", "hook_venv", "curl"):
        _refresh_input(input_path)
        proc = subprocess.run(cmds[name], shell=True, cwd=ROOT, env=env, capture_output=True, text=True)  # noqa: S602
        answer = json.loads(proc.stdout or "{}").get("hookSpecificOutput", {})
        if answer.get("permissionDecision") != "allow":
            raise RuntimeError(f"{name} did not answer allow: {proc.stdout[:300]!r} {proc.stderr[:300]!r}")


# A command naming paths every way the gatherer resolves them, over `link_tree`.
GATHER_COMMAND = "cd src && cat app.py | grep x > ../out.txt; ls -la abs/keys rel chain ~/notes"


def link_tree(root: Path) -> Path:
    """A project with every kind of link the gatherer must agree with realpath on."""
    (root / "secret" / "keys").mkdir(parents=True)
    (root / "secret" / "keys" / "id").write_text("key")
    project = root / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("x = 1\n")
    (project / "file").write_text("")
    links = {
        "abs": str(root / "secret"),
        "rel": "../secret/keys",
        "chain": "abs",
        "loop1": "loop2",
        "loop2": "loop1",
        "dangling": "/nonexistent/dir",
        "dotdot": "missing/../src",
        "self": ".",
    }
    for name, target in links.items():
        os.symlink(target, project / name)
    return project


def gather_times(work_dir: Path, runs: int) -> list[float]:
    """The hook's facts gathering (`agent.facts.gather`) in process, one call's seconds per run."""
    from agent.facts import gather

    root = work_dir / f"facts-tree-{uuid.uuid4().hex[:8]}"
    project = link_tree(root)
    try:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            gather("Bash", {"command": GATHER_COMMAND}, str(project), home=str(root))
            times.append(time.perf_counter() - started)
        return times
    finally:
        shutil.rmtree(root)


def run(env: Any) -> Figure:
    runs, rounds = env.pick((2, 1), (4, 2), (8, 4))
    input_path = env.work_dir / "hook-input.json"
    _refresh_input(input_path)
    for module in ("agent/__init__.py", "agent/hook.py", "agent/facts.py"):  # what a first run writes
        py_compile.compile(str(ROOT / module), doraise=True)
    with env.server("daphne") as server:
        token = env.fixtures["agent_token"]
        cmds = commands(server.url, token, input_path, installed_bundle(server.url, env.work_dir))
        child_env = env.child_env(GATEHOUSE_TOKEN=token)
        _check_outputs(cmds, input_path, child_env)
        if shutil.which("hyperfine"):
            tool = "hyperfine"
            times = _hyperfine(cmds, runs, rounds, input_path, child_env, env.work_dir)
        else:
            tool = "own loop (hyperfine not installed)"
            times = _own_timing(cmds, runs * rounds, input_path, child_env)
    times["gather"] = gather_times(env.work_dir, 50)
    med = {name: percentile(t, 50) * 1000 for name, t in times.items()}
    p99 = {name: percentile(t, 99) * 1000 for name, t in times.items()}
    figure = Figure(
        4,
        TITLE,
        details={
            "tool": tool,
            "runs": runs * rounds,
            "median_ms": med,
            "p99_ms": p99,
            "commands": {k: v.replace(token, "<token>") for k, v in cmds.items()},
        },
    )
    server_answer = med["curl"] - med["curl_floor"]
    overhead = med["bundle"] - med["floor"] - server_answer

    def beside_floor(metric: str, name: str, floor: str = "floor", floor_name: str = "python3 -c pass") -> Row:
        return Row(
            metric, round(med[name], 1), "ms", round(med[floor], 1), floor_name, round(med[name] / med[floor], 2)
        )

    def within(metric: str, value: float, limit: float) -> Row:
        return Row(metric, round(value, 1), "ms", None, "", None, f"<= {limit:g} ms", value <= limit)

    figure.rows = [
        beside_floor("the hook as a laptop runs it (the bundle, installed), median wall time", "bundle"),
        within("installed bundle minus floor", med["bundle"] - med["floor"], 10),
        beside_floor("the hook as the server's machine runs it (install_claude_hooks), median", "checkout"),
        within("server machine's hook minus floor", med["checkout"] - med["floor"], 10),
        Row("server's answer (curl minus curl's own start)", round(server_answer, 1), "ms"),
        within("installed bundle minus (floor + server's answer)", overhead, 15),
        beside_floor("the interpreter as the hooks start it (python3 -I -S -c pass), median", "isolated_floor"),
        beside_floor("python3 -m agent.hook (bytecode cached), median", "hook"),
        beside_floor("the same under the venv python, median", "hook_venv", "venv_floor", ".venv python -c pass"),
        beside_floor("curl to /hooks/claude-code median", "curl"),
        Row("installed bundle minus curl (client-side Python cost)", round(med["bundle"] - med["curl"], 1), "ms"),
        Row(
            "of which the facts gathering, in process, median (14-word command, a tree of symlinks)",
            round(med["gather"], 2),
            "ms",
            round(med["bundle"] - med["curl"], 1),
            "bundle minus curl",
            round(med["gather"] / max(med["bundle"] - med["curl"], 1e-9), 3),
        ),
        Row("facts gathering, worst of 50", round(max(times["gather"]) * 1000, 2), "ms"),
    ]
    return figure
