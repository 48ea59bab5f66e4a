"""Options that make a command run code are never covered by a prefix or wildcard rule.

Every command in ``policy.shell.options.CODE_OPTIONS`` has risky invocations here (the
test fails when one is missing), each tried under ``Bash(<name>:*)``, ``Bash(<name> *)``
and ``Bash(* --version)`` and through spelling variants (absolute path, a harmless
wrapper, ``--opt=value``); a control per command proves the same rules still allow
the ordinary use, so the test can fail.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy import decide
from policy.shell.options import CODE_OPTIONS

CWD = "/srv/project"
HOME = "/home/dev"

# name → (invocations that run code, an ordinary invocation the prefix rule allows)
CASES: dict[str, tuple[list[str], str | None]] = {
    "npm": (["npm run test --script-shell=sh", "npm run test --script-shell sh", "npm exec -c id"], "npm run test"),
    "npx": (["npx --call id", "npx -c id"], None),
    "pnpm": (["pnpm run test --shell sh"], "pnpm run test"),
    "yarn": (["yarn run test --node-options=--require=/tmp/x.js"], "yarn run test"),
    "bun": (["bun -e 'require(1)'", "bun --eval x"], "bun test"),
    "node": (["node -e 'process.exit()'", "node --require ./x.js app.js", "node -p 1"], "node app.js"),
    "deno": (["deno eval 'Deno.exit()'", "deno run --eval x"], "deno fmt"),
    "sed": (
        [
            "sed '1e id' f",
            "sed --expression='1e id' f",
            "sed -e 's/a/id/e' f",
            "sed 's/a/b/w /tmp/x' f",
            "sed -f s.sed f",
        ],
        "sed -n '1,5p' f",
    ),
    "tar": (
        [
            "tar --checkpoint-action=exec=sh -cf x.tar .",
            "tar --to-command=sh -xf x.tar",
            "tar -I sh -xf x.tar",
            "tar -xIsh -f x.tar",
            "tar --use-compress-program=sh -xf x.tar",
        ],
        "tar -tzf x.tgz",
    ),
    "find": (["find . -exec id ;", "find . -execdir id ;", "find . -ok id ;", "find . -delete"], "find . -name x"),
    "fd": (["fd -x id", "fd --exec-batch id"], "fd x"),
    "git": (
        [
            "git -c core.fsmonitor=id status",
            "git -ccore.pager=id log",
            "git --config-env=core.pager=X log",
            "git --git-dir=/tmp/evil status",
            "git fetch --upload-pack=id origin",
            "git clone -u id x",
            "git rebase -x id main",
            "git grep -O id x",
            "git bisect run id",
            "git submodule foreach id",
            "git difftool",
        ],
        "git status --short",
    ),
    "rsync": (["rsync -e 'sh -c id' a b", "rsync -avze id a b", "rsync --rsync-path=id a b:"], "rsync -av a b"),
    "scp": (["scp -S id a b:", "scp -o ProxyCommand=id a b:"], "scp a b:"),
    "sftp": (["sftp -D id h", "sftp -oProxyCommand=id h"], "sftp h"),
    "ssh": (["ssh -o ProxyCommand=id h", "ssh -o 'LocalCommand id' h", "ssh -F /tmp/cfg h"], "ssh h uptime"),
    "python": (
        ["python3 -c 'import os' --version", "python -Ic 1", "python3.12 -W ignore -c 1"],
        "python -m pytest -c x",
    ),
    "perl": (["perl -e 1", "perl -ne print f", "perl -MPOSIX x.pl"], "perl x.pl"),
    "ruby": (["ruby -e 1", "ruby -ne 1"], "ruby x.rb"),
    "php": (["php -r 'echo 1;'"], "php x.php"),
    "lua": (["lua -e 'os.exit()'"], "lua x.lua"),
    "Rscript": (["Rscript -e 'q()'"], "Rscript x.R"),
    "osascript": (["osascript -e 'x'"], "osascript x.scpt"),
    "awk": (
        [
            "awk 'BEGIN{system(\"id\")}'",
            "awk '{print | \"sh\"}' f",
            "gawk -f prog.awk f",
            "awk '{print > \"/tmp/x\"}' f",
        ],
        "awk '{print $1}' f",
    ),
    "xargs": (["xargs id", "xargs -0 ls"], None),
    "parallel": (["parallel id ::: a"], None),
    "less": (["less '+!id' f", "less -k keys f"], "less f"),
    "more": (["more '+|id' f"], "more f"),
    "man": (["man -P id ls"], "man ls"),
    "zip": (["zip -TT id x.zip f", "zip --unzip-command=id x.zip f"], "zip x.zip f"),
    "vim": (["vim -c '!id' f", "vim --cmd x f"], None),
    "vi": (["vi -c '!id' f"], None),
    "nvim": (["nvim -S x.vim"], None),
    "emacs": (["emacs --eval '(x)'"], None),
    "gdb": (["gdb -ex run x", "gdb -x cmds x"], None),
    "sort": (["sort --compress-program=id f"], "sort f"),
    "rg": (["rg --pre id x"], "rg x"),
    "cpio": (["cpio --rsh-command=id -o"], None),
    "make": (["make --eval='x:;id'"], "make test"),
    "docker": (["docker run alpine id", "docker exec c id"], "docker ps"),
}


def rules_for(name: str) -> list[dict[str, Any]]:
    allow = [f"Bash({name}:*)", f"Bash({name} *)", "Bash(* --version)", "Bash(python -m pytest:*)"]
    return [{"source": "projectSettings", "permissions": {"allow": allow}}]


def behaviour(command: str, name: str) -> str:
    doc = {"tool_name": "Bash", "tool_input": {"command": command}, "cwd": CWD, "home": HOME, "rules": rules_for(name)}
    return decide(doc).behavior


def risky_cases() -> list[tuple[str, str]]:
    return [(name, command) for name, (commands, _) in CASES.items() for command in commands]


class CodeOptionTableTests:
    def test_it_has_cases_for_every_command_in_the_table(self) -> None:
        assert set(CASES) == set(CODE_OPTIONS)

    @pytest.mark.parametrize(("name", "command"), risky_cases())
    def test_it_never_allows_code_running_options_by_prefix(self, name: str, command: str) -> None:
        assert behaviour(command, name) == "ask"

    @pytest.mark.parametrize("name", sorted(n for n, (_, control) in CASES.items() if control))
    def test_it_still_allows_the_ordinary_command(self, name: str) -> None:
        control = CASES[name][1]
        assert control is not None
        assert behaviour(control, name) == "allow"

    def test_it_closes_the_reported_examples(self) -> None:
        assert behaviour("npm run test --script-shell=/tmp/x.sh", "npm") == "ask"
        assert behaviour("sed '1e touch /tmp/pwned' README.md", "sed") == "ask"
        assert behaviour("tar --checkpoint=1 --checkpoint-action=exec=sh\\ x.sh -cf /dev/null .", "tar") == "ask"
        assert behaviour("python3 -c 'import os; os.system(\"id\")' --version", "python3") == "ask"


class CodeOptionVariantTests:
    @settings(max_examples=300, deadline=None)
    @given(
        case=st.sampled_from(risky_cases()),
        spelling=st.sampled_from(["{c}", "/usr/bin/{c}", "timeout 5 {c}", "nice {c}", "{c} --version", "true && {c}"]),
    )
    def test_it_asks_for_every_spelling(self, case: tuple[str, str], spelling: str) -> None:
        name, command = case
        if spelling.startswith("/usr/bin/") and command.startswith("gawk"):
            return
        assert behaviour(spelling.format(c=command), name) in ("ask", "deny")
