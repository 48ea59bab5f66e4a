"""One table of commands that run their arguments (``timeout``, ``sudo``, ``su -c``, …).

Each wrapper is described by how it reads its own arguments: which options take a
value, which options carry a shell string it runs (``su -c``, ``env -S``,
``script -c``), which name a file it writes (``strace -o``), how many operands are
its own (``timeout 5``, ``chroot DIR``, ``flock FILE``). Stripping a wrapper yields
the command it runs, which deny and ask rules then see as the real command.

When a wrapper's arguments cannot be read for sure (an option the table does not
know may take a value, so the command could start at either word), every candidate
is analysed, so deny rules see each, and the call is never auto-allowed.
"""

from __future__ import annotations

import os.path
from collections.abc import Sequence
from dataclasses import dataclass, field

from policy.shell.words import Word


@dataclass(frozen=True)
class WrapperSpec:
    """How one wrapper reads its arguments (options may be bundled: ``-n5``, ``-oL``)."""

    values: frozenset[str] = frozenset()  # options followed by a value
    flags: frozenset[str] = frozenset()  # options without a value
    operands: int = 0  # the wrapper's own leading operands (``timeout 5``)
    strings: frozenset[str] = frozenset()  # options whose value is a shell string it runs
    writes: frozenset[str] = frozenset()  # options whose value is a file it writes
    joins: bool = False  # runs its remaining words joined into one shell string (watch)
    bare_shell: bool = False  # with no command it starts a shell reading its input
    safe: bool = False  # Claude Code strips it too: a rule for the inner command covers it
    any_long: bool = False  # every ``--option`` is ``--option[=value]`` (firejail)
    # Options may follow operands, and the operands are no command: ``su root -c CMD``
    # (a user), ``script -c CMD FILE`` (a file it writes).
    permute: str = ""  # "" | "user" | "file"
    # After its own operand, ``-c STRING`` or else the rest joined into a shell string.
    then_string: bool = False


def _spec(
    values: str = "",
    flags: str = "",
    *,
    operands: int = 0,
    strings: str = "",
    writes: str = "",
    joins: bool = False,
    bare_shell: bool = False,
    safe: bool = False,
    any_long: bool = False,
    permute: str = "",
    then_string: bool = False,
) -> WrapperSpec:
    return WrapperSpec(
        frozenset(values.split()) | frozenset(strings.split()) | frozenset(writes.split()),
        frozenset(flags.split()),
        operands,
        frozenset(strings.split()),
        frozenset(writes.split()),
        joins,
        bare_shell,
        safe,
        any_long,
        permute,
        then_string,
    )


WRAPPERS: dict[str, WrapperSpec] = {
    # Claude Code strips these itself: harmless to how the command runs.
    "timeout": _spec(
        "-s --signal -k --kill-after", "-v --verbose --preserve-status --foreground", operands=1, safe=True
    ),
    "nice": _spec("-n --adjustment", "", safe=True),
    "nohup": _spec(safe=True),
    "time": _spec(
        "-f --format", "-p -a -v --append --verbose --portability -q --quiet", writes="-o --output", safe=True
    ),
    "stdbuf": _spec("-i -o -e --input --output --error", "", safe=True),
    # Change who runs the command, where, or with what around it.
    "command": _spec("", "-p -v -V"),
    "builtin": _spec(),
    "exec": _spec("-a", "-c -l"),
    "coproc": _spec(),
    "env": _spec(
        "-u --unset -C --chdir --default-signal --ignore-signal --block-signal -P",
        "-i --ignore-environment -0 --null -v --debug --list-signal-handling -",
        strings="-S --split-string",
    ),
    "sudo": _spec(
        "-u --user -g --group -h --host -p --prompt -C --close-from -D --chdir -r --role -t --type "
        "-U --other-user -T --command-timeout -R --chroot",
        "-A --askpass -b --background -E --preserve-env -H --set-home -k --reset-timestamp -K "
        "--remove-timestamp -n --non-interactive -P --preserve-groups -S --stdin -s --shell -i --login -B --bell -N",
        bare_shell=True,
    ),
    "doas": _spec("-u -C", "-n -s -L", bare_shell=True),
    "run0": _spec("-u --user -g --group -D --chdir --setenv --property --unit --description --nice", "", any_long=True),
    "pkexec": _spec("--user", "--disable-internal-agent --keep-cwd"),
    "su": _spec(
        "-s --shell -g --group -G --supp-group -w --whitelist-environment",
        "- -l --login -m -p --preserve-environment -P --pty -f --fast",
        strings="-c --command --session-command",
        bare_shell=True,
        permute="user",
    ),
    "runuser": _spec(
        "-u --user -s --shell -g --group -G --supp-group -w --whitelist-environment",
        "- -l --login -m -p --preserve-environment -P --pty -f --fast",
        strings="-c --command --session-command",
        bare_shell=True,
        permute="user",
    ),
    "sg": _spec("", "-", operands=1, then_string=True),
    "setsid": _spec("", "-c --ctty -f --fork -w --wait"),
    "flock": _spec(
        "-w --timeout --wait -E --conflict-exit-code",
        "-s --shared -x -e --exclusive -u --unlock -n --nb --nonblock -o --close -F --no-fork --verbose",
        operands=1,
        then_string=True,
    ),
    "chroot": _spec("--userspec --groups", "--skip-chdir", operands=1, bare_shell=True),
    "busybox": _spec(),
    "strace": _spec(
        "-e -p -s -u -E -a -b -I -O -S -X -P --attach --env --user --string-limit --trace --signal "
        "--status --expr -U --summary-columns",
        "-c -C -d -D -f -ff -F -h -i -k -q -qq -r -t -tt -ttt -T -v -V -w -x -xx -y -yy -z -Z -n "
        "--follow-forks --output-separately --summary --summary-only",
        writes="-o --output",
    ),
    "ltrace": _spec("-e -p -s -u -a -n -l -L -x -A -D -F", "-b -c -C -f -h -i -r -S -t -tt -ttt -T -V -w", writes="-o"),
    "script": _spec(
        "-E --echo -I --log-in -O --log-out -B --log-io -T --log-timing -m --logging-format",
        "-a --append -e --return -f --flush --force -q --quiet -t --timing",
        strings="-c --command",
        bare_shell=True,
        permute="file",
    ),
    "ionice": _spec("-c --class -n --classdata", "-t --ignore"),
    "taskset": _spec("", "-a --all-tasks -c --cpu-list", operands=1),
    "chrt": _spec(
        "-T -P -D --sched-runtime --sched-period --sched-deadline",
        "-a -b -d -f -i -o -r -m -R -v -e --all-tasks --batch --deadline --fifo --idle --other --rr "
        "--reset-on-fork --ext",
        operands=1,
    ),
    "numactl": _spec("", "", any_long=True),
    "prlimit": _spec("", "--verbose", any_long=True),
    "unbuffer": _spec("", "-p"),
    "chronic": _spec("", "-e -v"),
    "caffeinate": _spec("-t -w", "-d -i -m -s -u"),
    "watch": _spec(
        "-n --interval -d --differences -q --equexit --shotsdir",
        "-b --beep -c --color -C --no-color -e --errexit -g --chgexit -p --precise -t --no-title -w --no-wrap "
        "-x --exec -r --no-rerun",
        joins=True,
    ),
    "xargs": _spec(
        "-I -i -n -P -L -l -d -E -e -s -a --max-args --max-procs --delimiter --arg-file --max-lines "
        "--max-chars --eof --replace --process-slot-var",
        "-0 --null -r --no-run-if-empty -t --verbose -p --interactive -x --exit -o --open-tty --show-limits",
    ),
    "firejail": _spec("", "", any_long=True),
    "nsenter": _spec("-t --target -S --setuid -G --setgid --wd -w --wdns", "-a --all -F -r -Z", any_long=True),
    "unshare": _spec("-S --setuid -G --setgid -R --root -w --wd", "-m -u -i -n -p -U -C -T -f -r -c", any_long=True),
    "systemd-run": _spec("-p --property -u --unit -E --setenv -M --machine -H --host", "", any_long=True),
    "setpriv": _spec("", "", any_long=True),
    "fakeroot": _spec("-l --lib -s -i --faked", "-u --unknown-is-real"),
    "faketime": _spec("", "-f", operands=1),
    "eatmydata": _spec(),
    "nocache": _spec(),
    "cpulimit": _spec(
        "-l --limit -p --pid -e --exe -P --path", "-z --lazy -i --include-children -v --verbose -k -r -q"
    ),
    "trickle": _spec("-u -d -w -t -l -n", "-s -v -V"),
    "torsocks": _spec("-u -p -a -P", "-i -d -q"),
    "proxychains": _spec("-f", "-q"),
    "proxychains4": _spec("-f", "-q"),
    "rlwrap": _spec("", "", any_long=True),
    "xvfb-run": _spec(
        "-n --server-num -e --error-file -f --auth-file -p --xauth-protocol -s --server-args", "-a -d -l"
    ),
    "dbus-run-session": _spec("--config-file --dbus-daemon", ""),
    "direnv": _spec("", "", operands=2),  # ``direnv exec DIR cmd``
    "valgrind": _spec("", "", any_long=True),
    "catchsegv": _spec(),
}
# Options in ``values`` that take one argument are followed by it; bundles like ``-n5``
# carry it inline. ``any_long`` wrappers take only ``--option[=value]`` options.
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish", "mksh", "ash", "csh", "tcsh", "yash", "posh"})


def command_name(value: str) -> str:
    """The binary's basename: ``/bin/rm`` and ``./rm`` are both ``rm`` for deny purposes."""
    return os.path.basename(value) if "/" in value else value


@dataclass
class Unwrapped:
    """The command a wrapper chain runs, and what else the wrappers do."""

    words: list[Word]
    wrappers: list[str] = field(default_factory=list)
    assignments: list[str] = field(default_factory=list)
    # Shell strings a wrapper runs (``su -c 'rm x'``): parsed as commands of their own.
    payloads: list[str] = field(default_factory=list)
    # Other readings of the words when an option was not understood; deny rules see each.
    alternatives: list[list[Word]] = field(default_factory=list)
    writes: list[Word] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def all_safe(self) -> bool:
        return all(WRAPPERS[name].safe for name in self.wrappers)


def strip_wrappers(words: Sequence[Word]) -> Unwrapped:
    """Peel wrappers off ``words`` (``sudo -u x nice -n 5 rm y`` → ``rm y``)."""
    result = Unwrapped(list(words))
    while result.words and not result.words[0].dynamic:
        name = command_name(result.words[0].value)
        spec = WRAPPERS.get(name)
        if spec is None:
            break
        parsed = _read_wrapper(name, spec, result.words[1:])
        result.assignments += parsed.assignments
        result.payloads += parsed.payloads
        result.writes += parsed.writes
        result.problems += parsed.problems
        result.alternatives += parsed.alternatives
        if not parsed.words:
            if not parsed.payloads and spec.bare_shell and not parsed.problems:
                result.problems.append(f"{name} without a command starts a shell that reads its input")
            break
        result.wrappers.append(name)
        result.words = parsed.words
    return result


def _read_wrapper(name: str, spec: WrapperSpec, args: list[Word]) -> Unwrapped:
    """Read one wrapper's options; what is left is the command it runs."""
    found = Unwrapped([])
    if spec.permute and not (name == "runuser" and any(w.value in ("-u", "--user") for w in args)):
        _read_permuted(name, spec, args, found)
        return found
    index = _read_options(name, spec, args, found)
    rest = args[index:]
    own, command = rest[: spec.operands], rest[spec.operands :]
    if len(own) < spec.operands:
        command = []
    if spec.then_string and command:
        # ``flock FILE -c CMD``, ``sg GROUP -c CMD``; ``sg GROUP CMD…`` runs them via sh -c.
        if command[0].value in ("-c", "--command") and len(command) > 1:
            # Words after the string are joined to it: what they do is unclear, and
            # deny rules had better see them as part of what runs.
            found.payloads.append(" ".join(w.value for w in command[1:]))
            command = []
        elif name == "sg":
            found.payloads.append(" ".join(w.value for w in command))
            command = []
    if spec.joins and command:
        found.payloads.append(" ".join(w.value for w in command))
        command = []
    found.words = command
    if found.problems and command:
        # The command may start at any of the next few words; analyse each reading.
        found.alternatives = [command[i:] for i in range(1, min(len(command), 4))]
    return found


def _read_options(name: str, spec: WrapperSpec, args: list[Word], found: Unwrapped) -> int:
    """Read leading options; return the index of the first word after them."""
    index = 0
    while index < len(args):
        value = args[index].value
        if value == "--":
            return index + 1
        if name == "env" and "=" in value and not value.startswith("-"):
            found.assignments.append(value)
        elif name == "nice" and value[:1] == "-" and value[1:].isdigit():
            pass  # ``nice -5 cmd``
        elif not value.startswith("-") or (value == "-" and value not in spec.flags):
            return index
        elif args[index].dynamic:
            found.problems.append(f"an option of {name} is only known at run time, so what it runs is uncertain")
        else:
            index = _read_option(name, spec, args, index, found)
        index += 1
    return index


def _read_permuted(name: str, spec: WrapperSpec, args: list[Word], found: Unwrapped) -> None:
    """``su``, ``runuser``, ``script``: options anywhere; operands are users or files."""
    index = 0
    operands: list[Word] = []
    while index < len(args):
        word = args[index]
        if word.value == "--":
            operands += args[index + 1 :]
            break
        if word.value.startswith("-") and word.value != "-":
            if word.dynamic:
                found.problems.append(f"an option of {name} is only known at run time, so what it runs is uncertain")
            else:
                index = _read_option(name, spec, args, index, found)
        elif word.value != "-":
            operands.append(word)
        index += 1
    if spec.permute == "file" and operands:
        found.writes.append(operands[0])
    if spec.permute == "user" and found.payloads and len(operands) > 1:
        # ``su root -c 'x' more words``: the words go to the shell as arguments; deny
        # rules see them as a command too, and with the string before them.
        found.payloads.append(" ".join(w.value for w in operands[1:]))
        found.payloads.append(" ".join([found.payloads[0], *(w.value for w in operands[1:])]))
    if not found.payloads and not found.problems:
        found.problems.append(f"{name} without a command starts a shell that reads its input")


def _read_option(name: str, spec: WrapperSpec, args: list[Word], index: int, found: Unwrapped) -> int:
    """Consume the option at ``index`` (and its value); return the index of its last word."""
    value = args[index].value
    option, attached = _split_option(value, spec)
    if option is None:
        found.problems.append(f"{name} option {value} is not understood, so what it runs is uncertain")
        return index
    if option not in spec.values:
        return index
    if attached is None:
        if index + 1 >= len(args):
            found.problems.append(f"{name} option {option} has no value")
            return index
        index += 1
        attached = args[index].value
    if option in spec.strings:
        found.payloads.append(attached)
    elif option in spec.writes:
        found.writes.append(args[index] if args[index].value == attached else _inline(args[index], attached))
    return index


def _split_option(value: str, spec: WrapperSpec) -> tuple[str | None, str | None]:
    """``(option, inline value)``; option None when the table cannot say what it is."""
    if value.startswith("--"):
        option, equals, attached = value.partition("=")
        known = option in spec.values or option in spec.flags or spec.any_long
        if not known:
            return None, None
        if spec.any_long and option not in spec.flags:
            # ``--opt=value`` is whole; a bare ``--opt`` is assumed to take no value.
            return option, (attached if equals else "")
        return option, (attached if equals else None)
    if value in spec.values or value in spec.flags:
        return value, None
    head = value[:2]
    if head in spec.values:
        return head, value[2:]  # ``-n5``, ``-oL``, ``-Srm -rf /``
    if all(f"-{letter}" in spec.flags for letter in value[1:]):
        return value[:2], None  # a bundle of flags: ``-fw``
    bundle = value[1:]
    for cut in range(1, len(bundle)):
        # ``-xc cmd``: flags, then one option taking the next word
        if all(f"-{letter}" in spec.flags for letter in bundle[:cut]) and f"-{bundle[cut]}" in spec.values:
            inline = bundle[cut + 1 :]
            return f"-{bundle[cut]}", (inline or None)
    return None, None


def _inline(word: Word, value: str) -> Word:
    return Word(value, word.dynamic, word.start, word.end, value)


def shell_payload(words: Sequence[Word]) -> Word | None:
    """For ``bash -c PAYLOAD`` (also ``-lc``, ``-ec``) return the payload word."""
    if not words or command_name(words[0].value) not in SHELLS:
        return None
    for index, word in enumerate(words[1:], start=1):
        value = word.value
        if value.startswith("-") and not value.startswith("--") and "c" in value[1:]:
            return words[index + 1] if index + 1 < len(words) else None
        if not value.startswith("-"):
            return None
    return None
