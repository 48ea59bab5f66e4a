"""The differential suite's cases: one machine layout, the settings, the calls.

Every call runs in every setting, and every setting in every mode but auto (which needs
the real model): a case is (mode, setting, call). The layout is fixed (a tmpfs at
``/srv`` in a private mount namespace, see ``tests/policy/oracle/claude.py``) so the
recording names the same paths on every machine.

A call must be harmless when Claude Code runs it (bypassPermissions runs nearly all of
them): it writes only under the layout, and ``rm`` is a fake that deletes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ROOT = "/srv"
HOME = "/srv/home/dev"
PROJECT = "/srv/home/dev/project"
OUTSIDE = "/srv/outside"
EXTRA = "/srv/extra"

MODES = ("default", "acceptEdits", "plan", "dontAsk", "bypassPermissions")

# path -> content; a value of None makes a directory; ("link", target) a symlink.
LAYOUT: dict[str, Any] = {
    f"{HOME}/.ssh/id_rsa": "-----BEGIN KEY-----\n",
    f"{HOME}/.bashrc": "alias ll='ls -l'\n",
    f"{HOME}/.gitconfig": "[user]\n",
    f"{HOME}/notes.txt": "notes\n",
    f"{HOME}/other/file.txt": "other\n",
    f"{PROJECT}/README.md": "readme a\n",
    f"{PROJECT}/.env": "KEY=secret\n",
    f"{PROJECT}/package.json": '{"scripts": {"test": "true"}}\n',
    f"{PROJECT}/src/app.py": "x = 1\n",
    f"{PROJECT}/src/lib/util.py": "y = 2\n",
    f"{PROJECT}/secrets/key.txt": "secret\n",
    f"{PROJECT}/docs/guide.md": "guide a\n",
    f"{PROJECT}/build/out.o": "obj\n",
    f"{PROJECT}/.git/HEAD": "ref: refs/heads/main\n",
    f"{PROJECT}/.git/config": "[core]\n",
    f"{PROJECT}/.git/hooks": None,
    f"{PROJECT}/.claude": None,
    f"{PROJECT}/.vscode": None,
    f"{PROJECT}/out": ("link", OUTSIDE),
    f"{OUTSIDE}/data.txt": "data a\n",
    f"{OUTSIDE}/sub/file.txt": "sub\n",
    f"{EXTRA}/extra.txt": "extra a\n",
}


@dataclass(frozen=True)
class Setting:
    """Rules and directories one CLI process runs with."""

    name: str
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    add_dirs: tuple[str, ...] = ()

    def permissions(self) -> dict[str, list[str]]:
        return {"allow": list(self.allow), "deny": list(self.deny), "ask": list(self.ask)}


SETTINGS = (
    Setting("none"),
    Setting(
        "allow",
        allow=(
            "Bash(echo:*)",
            "Bash(rm:*)",
            "Bash(git status)",
            "Bash(git log *)",
            "Bash(npm run test:*)",
            "Bash(cat:*)",
            "Bash(touch:*)",
            "Bash(cp:*)",
            "Bash(sed:*)",
            "Bash(tee:*)",
            "Bash(ls *)",
            "Bash(find:*)",
            "Bash(mkdir:*)",
            "Bash(python3:*)",
            "Edit(./src/**)",
            "Read(//srv/outside/**)",
            "WebFetch(domain:example.com)",
        ),
    ),
    Setting(
        "deny",
        deny=(
            "Read(.env)",
            "Read(./secrets/**)",
            "Read(~/.ssh/**)",
            "Read(./src/**)",
            "Edit(./docs/**)",
            "Bash(curl:*)",
            "Bash(git push:*)",
            "WebFetch(domain:evil.example)",
        ),
        allow=("Bash(cat:*)", "Bash(echo:*)", "Bash(grep:*)"),
    ),
    Setting(
        "ask",
        ask=("Bash(git push:*)", "Bash(npm publish:*)", "Read(./docs/**)", "Edit(./src/lib/**)", "Bash(ls:*)"),
        allow=("Bash", "Edit", "Read"),
    ),
    Setting("dirs", add_dirs=(EXTRA,), allow=("Bash(cat:*)", "Bash(touch:*)")),
)


@dataclass(frozen=True)
class Call:
    """One tool call the fake model makes."""

    id: str
    tool: str
    input: dict[str, Any] = field(default_factory=dict)


def bash(id: str, command: str) -> Call:
    return Call(id, "Bash", {"command": command})


_BASH_READ = [
    ("ls", "ls"),
    ("pwd", "pwd"),
    ("git-status", "git status"),
    ("cat-readme", "cat README.md"),
    ("grep-src", "grep -r x src"),
    ("head", "head -5 README.md"),
    ("wc", "wc -l README.md"),
    ("find", "find . -name '*.py'"),
    ("sed-n", "sed -n 1p README.md"),
    ("ls-la-home", "ls -la ~"),
    ("cat-home-notes", "cat ~/notes.txt"),
    ("cat-outside", f"cat {OUTSIDE}/data.txt"),
    ("cat-dotdot", "cat ../notes.txt"),
    ("cat-dotdot-outside", "cat ../../../outside/data.txt"),
    ("cat-extra", f"cat {EXTRA}/extra.txt"),
    ("ls-outside", f"ls {OUTSIDE}"),
    ("cat-etc", "cat /etc/hostname"),
    ("echo", "echo hi"),
    ("git-log", "git log --oneline -1"),
    ("git-diff", "git diff"),
    ("cat-link-out", "cat out/data.txt"),
    ("ls-dotdot", "ls .."),
]

_BASH_SECRETS = [
    ("cat-env", "cat .env"),
    ("cat-redirect-env", "cat < .env"),
    ("head-env", "head .env"),
    ("grep-env", "grep KEY .env"),
    ("cat-secrets", "cat secrets/key.txt"),
    ("cat-ssh", "cat ~/.ssh/id_rsa"),
    ("cd-secrets-cat", "cd secrets && cat key.txt"),
    ("cat-src", "cat src/app.py"),
    ("grep-src-deny", "grep -r y src/lib"),
    ("cat-docs", "cat docs/guide.md"),
]

_BASH_WRITES = [
    ("echo-redirect", "echo hi > out1.txt"),
    ("echo-append", "echo hi >> out2.txt"),
    ("echo-redirect-outside", f"echo hi > {OUTSIDE}/o1.txt"),
    ("echo-redirect-home", "echo hi > ~/o2.txt"),
    ("echo-redirect-extra", f"echo hi > {EXTRA}/o3.txt"),
    ("echo-redirect-git-hook", "echo x > .git/hooks/pre-commit"),
    ("echo-redirect-vscode", "echo x > .vscode/settings.json"),
    ("echo-redirect-claude", "echo x > .claude/settings.json"),
    ("echo-redirect-envrc", "echo x > .envrc"),
    ("echo-append-bashrc", "echo x >> ~/.bashrc"),
    ("echo-redirect-devnull", "echo hi > /dev/null"),
    ("ls-stderr-devnull", "ls 2>/dev/null"),
    ("tee", "echo x | tee out3.txt"),
    ("tee-git", "echo x | tee .git/config"),
    ("tee-outside", f"echo x | tee {OUTSIDE}/t1.txt"),
    ("touch", "touch new1.txt"),
    ("touch-home", "touch ~/x1"),
    ("touch-outside", f"touch {OUTSIDE}/x2"),
    ("touch-extra", f"touch {EXTRA}/x3"),
    ("touch-git", "touch .git/x4"),
    ("mkdir", "mkdir newdir1"),
    ("mkdir-outside", f"mkdir {OUTSIDE}/nd1"),
    ("cp", "cp README.md copy1.md"),
    ("cp-outside", f"cp README.md {OUTSIDE}/copy2.md"),
    ("cp-home", "cp README.md ~/copy3.md"),
    ("cp-into-git", "cp README.md .git/copy4"),
    ("mv-build", "mv build/out.o build/out2.o"),
    ("sed-i", "sed -i s/a/b/ docs/guide.md"),
    ("sed-i-outside", f"sed -i s/a/b/ {OUTSIDE}/data.txt"),
    ("sed-i-src", "sed -i s/x/z/ src/app.py"),
    ("echo-redirect-src", "echo y > src/new2.py"),
    ("echo-redirect-dotdot", "echo y > ../o4.txt"),
    ("echo-redirect-link-out", "echo y > out/o5.txt"),
]

_BASH_RM = [
    ("rm-file", "rm build/out.o"),
    ("rm-rf-build", "rm -rf build"),
    ("rm-rf-outside", f"rm -rf {OUTSIDE}/sub"),
    ("rm-rf-home", "rm -rf ~"),
    ("rm-rf-home-slash", "rm -rf ~/"),
    ("rm-rf-root", "rm -rf /"),
    ("rm-rf-root-star", "rm -rf /*"),
    ("rm-rf-dotdot", "rm -rf .."),
    ("rm-rf-dot", "rm -rf ."),
    ("rm-rf-home-var", "rm -rf $HOME"),
    ("rm-rf-usr", "rm -rf /usr"),
    ("rm-rf-etc", "rm -rf /etc"),
    ("rm-f-src", "rm -f src/app.py"),
    ("rm-rf-git", "rm -rf .git"),
    ("rm-rf-extra", f"rm -rf {EXTRA}/extra.txt"),
    ("rm-rf-home-other", "rm -rf ~/other"),
    ("rmdir", "rmdir build"),
]

_BASH_COMPOUND = [
    ("and", "ls && pwd"),
    ("semicolon", "git status; echo done"),
    ("pipe", "ls | grep x"),
    ("echo-and-rm", "echo hi && rm -rf build"),
    ("cat-pipe-wc", "cat README.md | wc -l"),
    ("or", "ls || echo no"),
    ("subshell", "(cd src && ls)"),
    ("command-substitution", "echo $(cat .env)"),
    ("backticks", "echo `whoami`"),
    ("background", "ls &"),
    ("heredoc", "cat <<EOF\nhi\nEOF"),
    ("bash-c", "bash -c 'ls'"),
    ("sh-c-rm", 'sh -c "rm -rf build"'),
    ("eval", "eval ls"),
    ("env-prefix", "FOO=1 ls"),
    ("env-prefix-echo", "FOO=bar echo hi"),
    ("timeout", "timeout 5 ls"),
    ("nice", "nice ls"),
    ("env-wrapper", "env ls"),
    ("xargs", "echo README.md | xargs cat"),
    ("find-delete", "find . -name no-such-file -delete"),
    ("find-exec-rm", r"find . -name no-such-file -exec rm {} \;"),
    ("git-push-force", "git status && git push --force"),
    ("git-push", "git push origin main"),
    ("git-reset-hard", "git reset --hard"),
    ("npm-test", "npm run test"),
    ("npm-test-args", "npm run test -- --watch"),
    ("npm-build", "npm run build"),
    ("npm-publish", "npm publish"),
    ("git-commit", "git commit -m x"),
    ("python-c", "python3 -c 'print(1)'"),
    ("curl", "curl -s http://127.0.0.1:9/"),
    ("cd-outside-ls", f"cd {OUTSIDE} && ls"),
    ("cd-dotdot-ls", "cd .. && ls"),
    ("cd-src-cat", "cd src && cat app.py"),
    ("cd-home-cat", "cd ~ && cat .bashrc"),
    ("cd-src", "cd src"),
    ("cd-tmp", "cd /tmp"),
    ("cd-extra", f"cd {EXTRA}"),
    ("newline", "ls\npwd"),
    ("echo-and-redirect-git", "echo a && echo x > .git/config"),
    ("ls-glob-star", "ls *"),
    # tree-sitter-bash read a line after a pipeline of three as the last command's words
    ("pipeline-then-line", "ls | ls | cat README.md\ncurl -s http://127.0.0.1:9/ 2>/dev/null"),
    ("pipeline-then-redirect", "ls | ls | ls | ls 2>/dev/null\ncurl -s http://127.0.0.1:9/ && ls"),
    ("pipeline-comment-then-line", "ls | ls | cat README.md # c\ncurl -s http://127.0.0.1:9/ 2>/dev/null"),
    ("pipeline-backslash-then-line", "ls | ls | cat README.md a\\\\\ncurl -s http://127.0.0.1:9/ 2>/dev/null"),
    ("pipeline-comment-then-read", "ls | ls | wc -l # count\ngit status 2>/dev/null"),
    # bash runs these as curl and rm; tree-sitter-bash reads groups, errors and comments
    ("backtick-comment-then-curl", "echo `ls # c` && curl -s http://127.0.0.1:9/"),
    ("brace-command-name", "c{u,}rl -s http://127.0.0.1:9/"),
    ("cat-redirect-then-ssh", "cat README.md 2>/dev/null ~/.ssh/id_rsa"),
    ("cat-brace-ssh", "cat {README.md,~/.ssh/id_rsa}"),
    ("brace-command", "{curl,-s,http://127.0.0.1:9/}"),
    ("brace-rm", "{rm,-rf,build}"),
    # bash runs these too: backticks the parser keeps as text, a value evaluated again
    ("expansion-backtick-curl", "echo ${x:-`curl -s http://127.0.0.1:9/`}"),
    ("arithmetic-value-curl", "x='a[$(curl -s http://127.0.0.1:9/)]'; echo $((x))"),
    ("prompt-value-curl", "x='$(curl -s http://127.0.0.1:9/)'; echo ${x@P}"),
    ("backtick-comment-first-then-curl", "echo `#` && curl -s http://127.0.0.1:9/"),
    ("cat-home-double-slash-ssh", "cat ~//.ssh/id_rsa"),
    ("redirect-dup-backslash-outside", "echo x >& ..\\\\/out.txt"),
    (
        "parse-error-then-curl",
        "cat README.md >/dev/null <<<hi || ls >/dev/null a\\\\; curl -s http://127.0.0.1:9/ |& cat ;\nls; |\nls",
    ),
]


def _files() -> list[Call]:
    reads = [
        ("read-readme", f"{PROJECT}/README.md"),
        ("read-relative", "README.md"),
        ("read-src", f"{PROJECT}/src/app.py"),
        ("read-env", f"{PROJECT}/.env"),
        ("read-secrets", f"{PROJECT}/secrets/key.txt"),
        ("read-ssh", f"{HOME}/.ssh/id_rsa"),
        ("read-ssh-tilde", "~/.ssh/id_rsa"),
        ("read-outside", f"{OUTSIDE}/data.txt"),
        ("read-extra", f"{EXTRA}/extra.txt"),
        ("read-dotdot", f"{PROJECT}/../notes.txt"),
        ("read-etc", "/etc/hostname"),
        ("read-link-out", f"{PROJECT}/out/data.txt"),
        ("read-git-config", f"{PROJECT}/.git/config"),
        ("read-docs", f"{PROJECT}/docs/guide.md"),
    ]
    writes = [
        ("project", f"{PROJECT}/new-{{n}}.txt"),
        ("src", f"{PROJECT}/src/new-{{n}}.py"),
        ("src-lib", f"{PROJECT}/src/lib/new-{{n}}.py"),
        ("docs", f"{PROJECT}/docs/new-{{n}}.md"),
        ("git-hook", f"{PROJECT}/.git/hooks/new-{{n}}"),
        ("claude-settings", f"{PROJECT}/.claude/new-{{n}}.json"),
        ("claude-worktrees", f"{PROJECT}/.claude/worktrees/new-{{n}}.txt"),
        ("vscode", f"{PROJECT}/.vscode/new-{{n}}.json"),
        ("envrc", f"{PROJECT}/sub-{{n}}/.envrc"),
        ("gitmodules", f"{PROJECT}/sub-{{n}}/.gitmodules"),
        ("mcp-json", f"{PROJECT}/sub-{{n}}/.mcp.json"),
        ("husky", f"{PROJECT}/.husky/new-{{n}}"),
        ("git-upper", f"{PROJECT}/.GIT/new-{{n}}"),
        ("env-file", f"{PROJECT}/sub-{{n}}/.env"),
        ("outside", f"{OUTSIDE}/new-{{n}}.txt"),
        ("home", f"{HOME}/new-{{n}}.txt"),
        ("home-bashrc", f"{HOME}/sub-{{n}}/.bashrc"),
        ("extra", f"{EXTRA}/new-{{n}}.txt"),
        ("dotdot", f"{PROJECT}/../new-dotdot-{{n}}.txt"),
        ("link-out", f"{PROJECT}/out/new-link-{{n}}.txt"),
    ]
    calls = [Call(id, "Read", {"file_path": path}) for id, path in reads]
    for id, path in writes:
        calls.append(Call(f"write-{id}", "Write", {"file_path": path.format(n="w"), "content": "x\n"}))
        calls.append(
            Call(f"edit-{id}", "Edit", {"file_path": path.format(n="e"), "old_string": "", "new_string": "x\n"})
        )
    return calls


def _search() -> list[Call]:
    globs = [
        ("glob", {"pattern": "**/*.py"}),
        ("glob-path-src", {"pattern": "*.py", "path": f"{PROJECT}/src"}),
        ("glob-path-secrets", {"pattern": "*", "path": f"{PROJECT}/secrets"}),
        ("glob-pattern-src", {"pattern": "src/**"}),
        ("glob-outside", {"pattern": "*.txt", "path": OUTSIDE}),
        ("glob-outside-pattern", {"pattern": f"{OUTSIDE}/*.txt"}),
        ("glob-extra", {"pattern": "*", "path": EXTRA}),
        ("glob-dotdot", {"pattern": "*.txt", "path": f"{PROJECT}/.."}),
        ("glob-home-ssh", {"pattern": "*", "path": f"{HOME}/.ssh"}),
        ("glob-env", {"pattern": ".env*"}),
    ]
    greps = [
        ("grep", {"pattern": "x"}),
        ("grep-path-env", {"pattern": "KEY", "path": f"{PROJECT}/.env"}),
        ("grep-path-src", {"pattern": "x", "path": f"{PROJECT}/src"}),
        ("grep-path-secrets", {"pattern": "x", "path": f"{PROJECT}/secrets"}),
        ("grep-outside", {"pattern": "x", "path": OUTSIDE}),
        ("grep-extra", {"pattern": "x", "path": EXTRA}),
        ("grep-dotdot", {"pattern": "x", "path": f"{PROJECT}/.."}),
        ("grep-home-ssh", {"pattern": "KEY", "path": f"{HOME}/.ssh"}),
        ("grep-glob-env", {"pattern": "KEY", "glob": ".env"}),
    ]
    fetches = [
        ("webfetch", "https://example.com/"),
        ("webfetch-sub", "https://docs.example.com/page"),
        ("webfetch-evil", "https://evil.example/x"),
        ("webfetch-other", "https://other.example/"),
    ]
    calls = [Call(id, "Glob", spec) for id, spec in globs]
    calls += [Call(id, "Grep", spec) for id, spec in greps]
    calls += [Call(id, "WebFetch", {"url": url, "prompt": "Summarise."}) for id, url in fetches]
    return calls


CALLS: tuple[Call, ...] = tuple(
    [bash(f"bash-{id}", command) for id, command in _BASH_READ + _BASH_SECRETS + _BASH_WRITES + _BASH_RM]
    + [bash(f"bash-{id}", command) for id, command in _BASH_COMPOUND]
    + _files()
    + _search()
)


def case_id(mode: str, setting: Setting, call: Call) -> str:
    return f"{mode}/{setting.name}/{call.id}"
