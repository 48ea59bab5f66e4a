"""Per command, the options and arguments that make it run code it was not named for.

``Bash(npm run test:*)`` allows the test script, not ``npm run test --script-shell=sh``;
``Bash(* --version)`` allows asking a version, not ``python3 -c '…' --version``. A
prefix or wildcard rule matches the start of a command and says nothing about what
the rest makes it run, so a command carrying one of these never auto-allows: it is a
blocker of the shell analysis, and a person (or an exact rule the person saw) decides.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Check = Callable[[Sequence[str]], str | None]


@dataclass(frozen=True)
class OptionTable:
    """Options that run code: whole words, ``--long=value`` forms and bundled letters."""

    options: frozenset[str] = frozenset()  # ``-c``, ``--script-shell`` (also ``--x=…``)
    letters: str = ""  # short options that may be bundled (``-ne`` for perl's ``e``)
    subcommands: frozenset[str] = frozenset()  # the first operand runs code (``git bisect run``)
    always: str = ""  # the command runs its arguments whatever they are (``xargs``)
    arguments: Check | None = None  # checks on the operands (sed scripts, awk programs)
    # Interpreters stop reading their own options at the script or ``-m module``:
    # ``python -m pytest -c setup.cfg`` passes ``-c`` to pytest.
    stop_at_operand: bool = False
    values: frozenset[str] = frozenset()  # options of its own that take the next word

    def problem(self, name: str, words: Sequence[str]) -> str | None:
        if self.always:
            return f"{name} {self.always}"
        skip = False
        for word in words[1:]:
            if skip:
                skip = False
                continue
            found = self._option(word)
            if found:
                return f"{name} {found} runs code that a prefix rule does not cover"
            if self.stop_at_operand and (word == "-m" or not word.startswith("-")):
                break
            skip = word in self.values
        if self.subcommands and any(w in self.subcommands for w in words[1:3]):
            return f"{name} {next(w for w in words[1:3] if w in self.subcommands)} runs commands"
        return self.arguments(words) if self.arguments else None

    def _option(self, word: str) -> str | None:
        head = word.split("=", 1)[0]
        if head in self.options:
            return head
        if self.letters and re.fullmatch(r"-[A-Za-z0-9]{2,}", word):
            hit = next((c for c in word[1:] if c in self.letters), None)
            if hit:
                return f"-{hit} (in {word})"
        if word.startswith("-") and not word.startswith("--"):
            for option in self.options:
                # ``-oProxyCommand=…``, ``-cfoo``: a short option with its value attached
                if len(option) == 2 and option[0] == "-" and word.startswith(option) and len(word) > 2:
                    return option
        return None


_SED_SAFE_COMMAND = re.compile(r"[pdqQnNlPDhHgGxz=]|[bt]\s*\w*|:\w+|[{}]|y(.).*\1.*\1")
_SED_ADDRESS = re.compile(
    r"\s*(?:\d+(?:~\d+)?|\$|/(?:[^/\\]|\\.)*/I?)?(?:\s*,\s*(?:\d+|\$|/(?:[^/\\]|\\.)*/I?|[+~]\d+))?\s*!?\s*"
)


def _sed_script_problem(script: str) -> str | None:
    """A sed script is fine only if every command is known not to run or write anything."""
    for command in re.split(r"[;\n]", script):
        body = _SED_ADDRESS.sub("", command, count=1).strip()
        if not body or body.startswith("#"):
            continue
        if body[0] == "s" and len(body) > 1:
            if not _sed_substitution_is_safe(body):
                return "sed s///e or s///w runs a command or writes a file"
            continue
        if not _SED_SAFE_COMMAND.fullmatch(body):
            return f"sed command {body[:20]!r} may run a command or write a file (e, w, r, W…)"
    return None


def _sed_substitution_is_safe(body: str) -> bool:
    delimiter = body[1]
    parts: list[str] = []
    current = ""
    escaped = False
    for char in body[2:]:
        if escaped:
            current += char
            escaped = False
        elif char == "\\":
            current += char
            escaped = True
        elif char == delimiter and len(parts) < 2:
            parts.append(current)
            current = ""
        else:
            current += char
    flags = current.strip()
    return len(parts) == 2 and re.fullmatch(r"[gpiImM0-9]*", flags) is not None


def _sed_arguments(words: Sequence[str]) -> str | None:
    scripts: list[str] = []
    index = 1
    explicit = False
    while index < len(words):
        word = words[index]
        if word in ("-e", "--expression") and index + 1 < len(words):
            scripts.append(words[index + 1])
            explicit = True
            index += 1
        elif word.startswith("--expression="):
            scripts.append(word.split("=", 1)[1])
            explicit = True
        elif word in ("-f", "--file") or word.startswith("--file="):
            return "sed -f reads a script that was not shown"
        elif not word.startswith("-") and not explicit and not scripts:
            scripts.append(word)
        index += 1
    for script in scripts:
        problem = _sed_script_problem(script)
        if problem:
            return problem
    return None


_AWK_RUNS = re.compile(r"\bsystem\s*\(|\|\s*&?\s*getline|\|\s*\"|\"\s*\||\bprintf?\b[^;{}]*>|\|&|\bgetline\b")


def _awk_arguments(words: Sequence[str]) -> str | None:
    index = 1
    while index < len(words):
        word = words[index]
        if word in ("-v", "-F"):
            index += 2
            continue
        if word in ("-f", "--file") or word.startswith("--file=") or (word.startswith("-f") and len(word) > 2):
            return "awk -f reads a program that was not shown"
        if word in ("-e", "--source") and index + 1 < len(words):
            word = words[index + 1]
        elif word.startswith("-"):
            index += 1
            continue
        # The first operand (or -e text) is the program; the rest are input files.
        if _AWK_RUNS.search(word):
            return "awk program runs commands or writes files (system(), pipes, print >)"
        return None
    return None


_GIT_GLOBAL = frozenset({"-c", "--config-env", "--git-dir", "--work-tree", "--exec-path"})
_GIT_ANYWHERE = frozenset({"--upload-pack", "--receive-pack", "--exec", "--template", "--extcmd"})
_GIT_PER_SUBCOMMAND = {
    "clone": frozenset({"-u"}),
    "rebase": frozenset({"-x"}),
    "grep": frozenset({"-O", "--open-files-in-pager"}),
}
_GIT_RUNNERS = {"difftool", "mergetool", "filter-branch", "daemon", "filter-repo"}


def _git_arguments(words: Sequence[str]) -> str | None:
    """``git -c core.fsmonitor=…``, ``--upload-pack``, ``rebase -x``, ``bisect run``…"""
    index = 1
    while index < len(words) and words[index].startswith("-"):
        option = words[index].split("=", 1)[0]
        if option in _GIT_GLOBAL or (option.startswith("-c") and len(option) > 2):
            return f"git {option} sets configuration or a repository that can run programs"
        index += 2 if option in ("-C", "--namespace") and "=" not in words[index] else 1
    sub = words[index] if index < len(words) else ""
    rest = list(words[index + 1 :])
    risky = _GIT_ANYWHERE | _GIT_PER_SUBCOMMAND.get(sub, frozenset())
    for word in rest:
        option = word.split("=", 1)[0]
        if option in risky or (sub == "rebase" and option.startswith("-x") and len(option) > 2):
            return f"git {sub} {option} runs a program"
    if sub in _GIT_RUNNERS or (sub == "bisect" and rest[:1] == ["run"]) or (sub == "submodule" and "foreach" in rest):
        return f"git {sub} runs commands"
    return None


def _less_arguments(words: Sequence[str]) -> str | None:
    for word in words[1:]:
        if word.startswith("+") and any(c in word for c in "!|"):
            return f"{words[0]} {word} runs a shell command"
    return None


def _ssh_arguments(words: Sequence[str]) -> str | None:
    risky = ("proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "match")
    for index, word in enumerate(words[1:], start=1):
        value = ""
        if word == "-o" and index + 1 < len(words):
            value = words[index + 1]
        elif word.startswith("-o") and len(word) > 2:
            value = word[2:]
        if value.strip().lower().startswith(risky):
            return f"{words[0]} -o {value.split('=', 1)[0].split()[0]} runs a local command"
    return None


def _table(
    options: str = "",
    letters: str = "",
    subcommands: str = "",
    always: str = "",
    arguments: Check | None = None,
    *,
    stop_at_operand: bool = False,
    values: str = "",
) -> OptionTable:
    return OptionTable(
        frozenset(options.split()),
        letters,
        frozenset(subcommands.split()),
        always,
        arguments,
        stop_at_operand,
        frozenset(values.split()),
    )


_PACKAGE_MANAGER = _table("--script-shell --node-options --shell --call -c --userconfig --globalconfig --init-module")
_NODE = _table("-e --eval -p --print -r --require --import --loader --experimental-loader -i --interactive")
CODE_OPTIONS: dict[str, OptionTable] = {
    "npm": _PACKAGE_MANAGER,
    "npx": _PACKAGE_MANAGER,
    "pnpm": _PACKAGE_MANAGER,
    "yarn": _PACKAGE_MANAGER,
    "bun": _table("-e --eval -p --print -r --preload --shell"),
    "node": _NODE,
    "deno": _table("--eval --print", subcommands="eval repl"),
    "sed": _table(arguments=_sed_arguments),
    "tar": _table(
        "--checkpoint-action --to-command -I --use-compress-program --info-script -F --new-volume-script "
        "--rsh-command --rmt-command",
        letters="IF",
    ),
    "find": _table("-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls"),
    "fd": _table("-x --exec -X --exec-batch"),
    "git": _table(arguments=_git_arguments),
    "rsync": _table("-e --rsh --rsync-path", letters="e"),
    "scp": _table("-S -F", arguments=_ssh_arguments),
    "sftp": _table("-S -D -F", arguments=_ssh_arguments),
    "ssh": _table("-F", arguments=_ssh_arguments),
    "python": _table("-c", letters="c", stop_at_operand=True, values="-W -X --check-hash-based-pycs"),
    "perl": _table("-e -E -M -x", letters="eEx"),
    "ruby": _table("-e -r", letters="e"),
    "php": _table("-r -B -E -R -F"),
    "lua": _table("-e -l"),
    "Rscript": _table("-e --expr"),
    "osascript": _table("-e"),
    "awk": _table(arguments=_awk_arguments),
    "xargs": _table(always="runs the command it is given on its input"),
    "parallel": _table(always="runs the commands it is given"),
    "less": _table("-k --lesskey-file --lesskey-src", arguments=_less_arguments),
    "more": _table(arguments=_less_arguments),
    "man": _table("-P --pager -H --html"),
    "zip": _table("-TT --unzip-command"),
    "vim": _table("-c --cmd -S"),
    "vi": _table("-c --cmd -S"),
    "nvim": _table("-c --cmd -S"),
    "emacs": _table("--eval -l --load -f --funcall"),
    "gdb": _table("-ex -x -iex -ix --command --eval-command"),
    "sort": _table("--compress-program"),
    "rg": _table("--pre"),
    "cpio": _table("--rsh-command"),
    "make": _table("--eval"),
    "docker": _table(subcommands="exec run"),
}
_ALIASES = {"gawk": "awk", "mawk": "awk", "nawk": "awk", "busybox-awk": "awk", "view": "vim", "gsed": "sed"}
_VERSIONED = re.compile(r"^(python|perl|ruby|php|lua)[0-9.]*$")


def code_option_problem(name: str, words: Sequence[str]) -> str | None:
    """Why ``words`` (a command called ``name``) runs code a prefix rule does not cover."""
    versioned = _VERSIONED.match(name)
    key = versioned.group(1) if versioned else _ALIASES.get(name, name)
    table = CODE_OPTIONS.get(key)
    return table.problem(name, words) if table else None
