"""The files a simple command writes, creates or deletes, per command.

Redirects are found by the walk; these are the writes that commands make through
their operands: ``tee FILE``, ``cp SRC DEST``, ``dd of=FILE``, ``sed -i … FILE``,
``touch``, ``mkdir``, ``rm``… A written path is checked against the protected paths
(``.git``, ``.claude``, shell rc files…) like a Write or Edit, and a command with any
write is never read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from policy.shell.words import Word

Writes = Callable[[Sequence[Word]], list[Word]]


def _operands(words: Sequence[Word], values: frozenset[str] = frozenset()) -> list[Word]:
    """Non-option words after the name; ``values`` are options that take the next word."""
    found: list[Word] = []
    skip = False
    options_done = False
    for word in words[1:]:
        if skip:
            skip = False
            continue
        if not options_done and word.value == "--":
            options_done = True
        elif not options_done and word.value.startswith("-") and word.value != "-":
            skip = word.value in values
        else:
            found.append(word)
    return found


def _all(values: str = "") -> Writes:
    takes = frozenset(values.split())
    return lambda words: _operands(words, takes)


def _all_but_first(values: str = "") -> Writes:
    takes = frozenset(values.split())
    return lambda words: _operands(words, takes)[1:]


def _is_target_option(option: str) -> bool:
    """``--target-directory`` or an abbreviation GNU getopt accepts (``--target``, ``--t``)."""
    return len(option) >= 3 and "--target-directory".startswith(option)


def _target_option(words: Sequence[Word]) -> tuple[Word, list[Word]] | None:
    """The directory of ``-t DIR`` (``--target-directory``, abbreviated or with ``=``), and
    the words left once it is taken out."""
    for index, word in enumerate(words):
        if index == 0:
            continue
        head, equals, value = word.value.partition("=")
        if (word.value == "-t" or _is_target_option(word.value)) and index + 1 < len(words):
            return words[index + 1], [*words[:index], *words[index + 2 :]]
        if equals and _is_target_option(head):
            return _inline(word, value), [*words[:index], *words[index + 1 :]]
        if word.value.startswith("-t") and not word.value.startswith("--") and len(word.value) > 2:
            return _inline(word, word.value[2:]), [*words[:index], *words[index + 1 :]]
    return None


def _into(directory: Word, source: Word) -> Word:
    """What ``cp SOURCE DIRECTORY`` writes when DIRECTORY is one: ``DIRECTORY/name``.

    The server cannot look at the agent's disk to know whether the destination is a
    directory, so a copy, move or link is taken to write both (``cp .bashrc ~`` writes
    ``~/.bashrc``).
    """
    name = source.value.rstrip("/").rsplit("/", 1)[-1]
    value = directory.value.rstrip("/") + "/" + name
    return Word(
        value, directory.dynamic or source.dynamic, directory.start, directory.end, value, directory.glob or source.glob
    )


def _destination(values: str = "", *, sources_too: bool = False) -> Writes:
    """``cp``/``mv``/``ln``/``install``: the last operand or ``-t DIR``, and each source's
    name inside it (``mv`` also empties sources)."""
    takes = frozenset(values.split())

    def writes(words: Sequence[Word]) -> list[Word]:
        target = _target_option(words)
        if target is not None:
            directory, rest = target
            sources = _operands(rest, takes)
            into = [_into(directory, source) for source in sources]
            return [directory, *into, *(sources if sources_too else [])]
        operands = _operands(words, takes)
        if len(operands) == 1 and words[0].value.endswith("ln"):
            return operands  # ``ln -s TARGET`` links TARGET's name here; checked as a whole
        sources, destination = operands[:-1], operands[-1:]
        into = [_into(destination[0], source) for source in sources]
        return [*destination, *into, *(sources if sources_too else [])]

    return writes


def _dd(words: Sequence[Word]) -> list[Word]:
    return [_inline(w, w.value[3:]) for w in words[1:] if w.value.startswith("of=")]


def _sed(words: Sequence[Word]) -> list[Word]:
    values = [w.value for w in words[1:]]
    in_place = any(
        v.startswith(("-i", "--in-place")) or (v.startswith("-") and not v.startswith("--") and "i" in v[1:])
        for v in values
    )
    if not in_place:
        return []
    operands = _operands(words, frozenset({"-e", "--expression", "-f", "--file", "-l", "--line-length"}))
    explicit = any(
        v in ("-e", "--expression", "-f", "--file") or v.startswith(("--expression=", "--file=")) for v in values
    )
    return operands if explicit else operands[1:]


def _option_value(options: str) -> Writes:
    """``curl -o FILE``, ``sort -o FILE``: the value of an option (also ``--opt=FILE``)."""
    names = frozenset(options.split())

    def writes(words: Sequence[Word]) -> list[Word]:
        found: list[Word] = []
        for index, word in enumerate(words):
            head = word.value.split("=", 1)[0]
            if word.value in names and index + 1 < len(words):
                found.append(words[index + 1])
            elif head in names and "=" in word.value:
                found.append(_inline(word, word.value.split("=", 1)[1]))
        return found

    return writes


def _git(words: Sequence[Word]) -> list[Word]:
    """``git config NAME VALUE`` writes the repository's configuration (core.fsmonitor…)."""
    values = [w.value for w in words]
    if len(values) < 2 or values[1] != "config":
        return []
    reading = {"--get", "--get-all", "--get-regexp", "-l", "--list", "--show-origin", "get", "list"}
    if any(v in reading for v in values[2:]):
        return []
    operands = [w for w in words[2:] if not w.value.startswith("-")]
    if len(operands) < 2 and not any(
        v in ("--unset", "--unset-all", "--add", "--edit", "-e", "set", "unset") for v in values
    ):
        return []
    for index, value in enumerate(values):
        if value in ("--file", "-f") and index + 1 < len(words):
            return [words[index + 1]]
    where = "~/.gitconfig" if "--global" in values else ".git/config"
    return [Word(where, False, words[0].start, words[-1].end, where)]


def _inline(word: Word, value: str) -> Word:
    return Word(value, word.dynamic, word.start, word.end, value, word.glob)


WRITERS: dict[str, Writes] = {
    # ``--backup[=CONTROL]`` and ``--output-error[=MODE]`` take a value only after ``=``.
    "tee": _all(),
    "cp": _destination("-S --suffix"),
    "mv": _destination("-S --suffix", sources_too=True),
    "ln": _destination("-S --suffix"),
    "install": _destination("-m --mode -o --owner -g --group -S --suffix"),
    "dd": _dd,
    "sed": _sed,
    "touch": _all("-d --date -r --reference -t"),
    "mkdir": _all("-m --mode"),
    "rm": _all(),
    "rmdir": _all(),
    "unlink": _all(),
    "shred": _all("-n --iterations -s --size --random-source"),
    "truncate": _all("-s --size -r --reference"),
    "chmod": _all_but_first("--reference"),
    "chown": _all_but_first("--reference"),
    "chgrp": _all_but_first("--reference"),
    "patch": _option_value("-o --output"),
    "curl": _option_value("-o --output"),
    "wget": _option_value("-O --output-document"),
    "sort": _option_value("-o --output"),
    "rsync": lambda words: _operands(words, frozenset({"-e", "--rsh"}))[-1:],
    "scp": lambda words: _operands(words, frozenset({"-P", "-i", "-o", "-F", "-S", "-c", "-l"}))[-1:],
    "git": _git,
}


# Claude Code 2.1.332 checks what these two remove against its critical paths (the root,
# a top-level directory, the home, the working directory and its ancestors).
REMOVERS = frozenset({"rm", "rmdir"})


def written_paths(name: str, words: Sequence[Word]) -> list[Word]:
    """The paths ``words`` (a command called ``name``) writes through its operands."""
    writer = WRITERS.get(name)
    return writer(words) if writer else []
