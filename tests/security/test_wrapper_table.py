"""Every wrapper in the table: the command it runs meets deny rules as the real command.

Each entry of ``policy.shell.wrappers.WRAPPERS`` has an invocation here (the test fails
when one is missing). Under a policySettings ``Bash(rm:*)`` deny each wrapped ``rm``
is denied; under a ``Bash(rm:*)`` allow only the wrappers Claude Code strips itself
are covered by the rule; options the table does not know make the call ask.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy import decide
from policy.shell.wrappers import WRAPPERS
from tests.policy.calls import gather

CWD = "/srv/project"
HOME = "/home/dev"
RM = "rm -rf /srv/project/build"

# wrapper → an invocation running RM (``{c}``: the command as words, ``{q}``: quoted)
INVOCATIONS: dict[str, str] = {
    "timeout": "timeout -s KILL 5 {c}",
    "nice": "nice -n 10 {c}",
    "nohup": "nohup {c}",
    "time": "time -p {c}",
    "stdbuf": "stdbuf -oL {c}",
    "command": "command {c}",
    "builtin": "builtin {c}",
    "exec": "exec -a name {c}",
    "coproc": "coproc {c}",
    "env": "env -S {q}",
    "sudo": "sudo -u root {c}",
    "doas": "doas -u root {c}",
    "run0": "run0 --user=root {c}",
    "pkexec": "pkexec --user root {c}",
    "su": "su root -c {q}",
    "runuser": "runuser -u root -- {c}",
    "sg": "sg wheel -c {q}",
    "setsid": "setsid -f {c}",
    "flock": "flock /tmp/lock -c {q}",
    "chroot": "chroot / {c}",
    "busybox": "busybox {c}",
    "strace": "strace -f -e trace=file {c}",
    "ltrace": "ltrace -f {c}",
    "script": "script -q -c {q} /dev/null",
    "ionice": "ionice -c 3 {c}",
    "taskset": "taskset -c 0-3 {c}",
    "chrt": "chrt -f 10 {c}",
    "numactl": "numactl --interleave=all {c}",
    "prlimit": "prlimit --nofile=1024 {c}",
    "unbuffer": "unbuffer -p {c}",
    "chronic": "chronic {c}",
    "caffeinate": "caffeinate -i {c}",
    "watch": "watch -n 1 {q}",
    "xargs": "xargs -0 {c}",
    "firejail": "firejail --net=none {c}",
    "nsenter": "nsenter --target=1 --mount {c}",
    "unshare": "unshare -m {c}",
    "systemd-run": "systemd-run --user --unit=x {c}",
    "setpriv": "setpriv --reuid=1000 {c}",
    "fakeroot": "fakeroot {c}",
    "faketime": "faketime '2020-01-01' {c}",
    "eatmydata": "eatmydata {c}",
    "nocache": "nocache {c}",
    "cpulimit": "cpulimit -l 50 -- {c}",
    "trickle": "trickle -d 100 {c}",
    "torsocks": "torsocks {c}",
    "proxychains": "proxychains -q {c}",
    "proxychains4": "proxychains4 -f /etc/p.conf {c}",
    "rlwrap": "rlwrap {c}",
    "xvfb-run": "xvfb-run -a {c}",
    "dbus-run-session": "dbus-run-session -- {c}",
    "direnv": "direnv exec . {c}",
    "valgrind": "valgrind --tool=memcheck {c}",
    "catchsegv": "catchsegv {c}",
}
# What issue reports named, verbatim, plus other shell-string forms.
REPORTED = [
    "env -S 'rm -rf /'",
    "env --split-string='rm -rf /'",
    "env -S'rm -rf /'",
    "su -c 'rm -rf /'",
    "su - root -c 'rm -rf /'",
    "su --command='rm -rf /' root",
    "setsid rm -rf /",
    "flock /tmp/l rm -rf /",
    "chroot / rm -rf /",
    "busybox rm -rf /",
    "strace rm -rf /",
    "script -c 'rm -rf /'",
    "script -qc 'rm -rf /' /dev/null",
    "watch 'rm -rf /'",
    "bash -c 'rm -rf /'",
    "sh -c 'rm -rf /'",
    "busybox sh -c 'rm -rf /'",
    "sudo -s rm -rf /",
    "doas rm -rf /",
    "nohup nice -n 5 timeout 9 rm -rf /",
    "sudo -u root env -S 'rm -rf /'",
    "/usr/bin/env -S 'rm -rf /'",
]


def invocation(name: str, command: str = RM) -> str:
    return INVOCATIONS[name].format(c=command, q=shlex.quote(command))


def bash(command: str, rules: list[dict[str, Any]]) -> str:
    doc = {
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "cwd": CWD,
        "home": HOME,
        "rules": rules,
        # What the hook reports from the agent's machine: without it, path-dependent allows ask.
        "facts": gather("Bash", {"command": command}, CWD, [], HOME),
    }
    return decide(doc).behavior


DENY_RM = [{"source": "policySettings", "permissions": {"deny": ["Bash(rm:*)"]}}]
ALLOW_RM = [{"source": "projectSettings", "permissions": {"allow": ["Bash(rm:*)", "Bash(ls:*)"]}}]


class WrapperTableTests:
    def test_it_has_an_invocation_for_every_wrapper(self) -> None:
        assert set(INVOCATIONS) == set(WRAPPERS)

    @pytest.mark.parametrize("name", sorted(WRAPPERS))
    def test_it_denies_the_wrapped_command(self, name: str) -> None:
        assert bash(invocation(name), DENY_RM) == "deny"

    @pytest.mark.parametrize("name", sorted(WRAPPERS))
    def test_it_covers_the_wrapper_with_the_inner_rule_only_when_claude_code_would(self, name: str) -> None:
        expected = "allow" if WRAPPERS[name].safe else "ask"
        assert bash(invocation(name), ALLOW_RM) == expected

    @pytest.mark.parametrize("name", sorted(WRAPPERS))
    def test_it_asks_when_an_option_is_not_understood(self, name: str) -> None:
        # An unknown option might take a value, so the command could start later:
        # each reading meets deny rules, and none is allowed.
        command = invocation(name).replace(f"{name} ", f"{name} -Q ", 1)
        assert bash(command, ALLOW_RM) in ("ask", "deny")
        assert bash(command, DENY_RM) == "deny"

    @pytest.mark.parametrize("command", REPORTED)
    def test_it_denies_the_reported_wrappers(self, command: str) -> None:
        assert bash(command, DENY_RM) == "deny"

    def test_it_still_allows_a_plain_command_under_its_rule(self) -> None:
        assert bash(RM, ALLOW_RM) == "allow"
        assert bash("timeout 5 ls -la", ALLOW_RM) == "allow"


class WrapperChainCorpusTests:
    @settings(max_examples=300, deadline=None)
    @given(chain=st.lists(st.sampled_from(sorted(WRAPPERS)), min_size=1, max_size=3))
    def test_it_denies_rm_under_any_chain_of_wrappers(self, chain: list[str]) -> None:
        command = RM
        for name in reversed(chain):
            command = invocation(name, command)
        assert bash(command, DENY_RM) == "deny", command
