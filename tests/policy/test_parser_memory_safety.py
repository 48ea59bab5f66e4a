"""Commands that made tree-sitter read outside its memory: analysed, never fatal.

tree-sitter-bash 0.25.1's scanner tests the character after ``{`` (and after ``{12..``)
with C ``isdigit()``, which indexes a 384-entry table by the whole code point. Whether
the stray read lands on mapped memory depends on the process's layout, so the test
suite died with a segmentation fault now and then (``git status; {🎉`` from a fuzz test).
Those tests run the engine in a child process whose ctype table was moved to the end of
a page followed by inaccessible memory, so any read past U+00FF faults every time.

``Node.parent`` finds the parent by recursing down from the root, one C frame per level:
a line nested a few thousand levels deep overflowed the thread's stack (and made the
walk quadratic before that). A child process walks such a line on a 1 MiB stack.

A crash fails the test instead of killing pytest.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policy.shell import parse

ROOT = Path(__file__).resolve().parents[2]
CWD = "/srv/project"
HOME = "/home/dev"

# Moves this thread's ctype table (entries -128..255 of unsigned short) to the end of a
# read-write page; the 2.2 MB after it (enough for index 0x10FFFF) is PROT_NONE. Loading
# a shared library resets the table pointer, so fence() runs after the imports and
# fenced() checks it still holds.
FENCE = r"""
import ctypes, mmap

libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.__ctype_b_loc.restype = ctypes.POINTER(ctypes.c_void_p)
ENTRY, PAGE = 2, mmap.PAGESIZE
GUARD = -(-0x110000 * ENTRY // PAGE) * PAGE
TABLE = libc.mmap(None, PAGE + GUARD, mmap.PROT_READ | mmap.PROT_WRITE,
                  mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0) + PAGE - 256 * ENTRY
assert libc.mprotect(TABLE + 256 * ENTRY, GUARD, 0) == 0


def fence():
    slot = libc.__ctype_b_loc()
    ctypes.memmove(TABLE - 128 * ENTRY, slot[0] - 128 * ENTRY, 384 * ENTRY)
    slot[0] = TABLE


def fenced():
    return libc.__ctype_b_loc()[0] == TABLE
"""

ANALYSE = (
    FENCE
    + r"""
import json, sys
import policy
from policy.shell import analyse, parse

job = json.load(sys.stdin)


def decide(command):
    doc = {"tool_name": "Bash", "tool_input": {"command": command}, "cwd": job["cwd"],
           "home": job["home"], "mode": "default", "context": "interactive", "rules": job["rules"]}
    return policy.decide(doc).behavior


decide("echo {a} ~/.ssh/x $(id) | sh")  # loads whatever the engine loads lazily
out = []
for command in job["commands"]:
    # Only the parse runs fenced: resolving paths may reset the table pointer (glibc's
    # strerror does), and analyse() reuses the memoised parse.
    fence()
    parse(command)
    assert fenced(), "the fence was lifted while parsing"
    analysis = analyse(command, cwd=job["cwd"], home=job["home"])
    out.append({"words": [list(c.words) for c in analysis.commands],
                "blockers": list(analysis.blockers), "can_auto_allow": analysis.can_auto_allow,
                "behavior": decide(command)})
print(json.dumps(out))
"""
)

RULES = [
    {"rule": "Bash(echo:*)", "behavior": "allow", "source": "projectSettings"},
    {"rule": "Bash(git status)", "behavior": "allow", "source": "projectSettings"},
    {"rule": "Bash(rm:*)", "behavior": "deny", "source": "policySettings"},
]
PARTY = "\U0001f389"  # an emoji: four bytes in UTF-8, far past the table


def run_fenced(script: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script], input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def analyse_fenced(commands: list[str]) -> list[dict[str, Any]]:
    job = {"commands": commands, "cwd": CWD, "home": HOME, "rules": RULES}
    result = run_fenced(ANALYSE, json.dumps(job))
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    answers: list[dict[str, Any]] = json.loads(result.stdout)
    return answers


@pytest.fixture(scope="module", autouse=True)
def fence_faults() -> None:
    """The fence must turn an out-of-table read into a crash, or these tests prove nothing."""
    probe = "import tree_sitter_bash\nfence()\nprint(libc.isdigit(ord('7')), flush=True)\nlibc.isdigit(0x100)\n"
    result = run_fenced(FENCE + probe)
    if result.returncode != 0 and "__ctype_b_loc" in result.stderr:
        pytest.fail("not glibc: no __ctype_b_loc to fence; the tests run on Debian (glibc), which make test expects")
    assert result.stdout.strip() not in ("", "0"), result.stderr  # in-table reads still work
    assert result.returncode == -signal.SIGSEGV, (result.returncode, result.stderr[-2000:])


class ScannerOutOfTableReadTests:
    def test_it_analyses_a_brace_before_a_wide_character_without_crashing(self) -> None:
        commands = [
            f"git status; {{{PARTY}",
            f"echo {{{PARTY}}}",
            "{\U00031860",
            "a{\U00066922*&",
            f"echo {{1..{PARTY}}}",
            f"echo {{12..3{PARTY}}}",
            "echo ${\u540d}",
            "echo {\ud800}",
            f"cat <<EOF\n{{{PARTY}\nEOF",
        ]
        for command, answer in zip(commands, analyse_fenced(commands), strict=True):
            assert not answer["can_auto_allow"], command
            assert answer["behavior"] != "allow", command
            assert any("right after '{'" in b for b in answer["blockers"]), (command, answer)

    def test_it_still_denies_the_commands_around_the_character(self) -> None:
        [answer] = analyse_fenced([f"rm -rf ~ {{{PARTY}}}"])
        assert answer["words"][0][:2] == ["rm", "-rf"]
        assert answer["behavior"] == "deny"

    def test_it_checks_payloads_decoded_from_the_command(self) -> None:
        # The command itself is ASCII; ``$'…'`` decodes to the character only inside the payload.
        [answer] = analyse_fenced(["bash -c $'echo {\\U0001F389}'"])
        assert any("right after '{'" in b for b in answer["blockers"]), answer
        assert answer["behavior"] != "allow"

    def test_it_leaves_wide_characters_elsewhere_alone(self) -> None:
        commands = [f"echo {PARTY}", f"echo {{a,b}}{PARTY}", f"echo {PARTY}{{1..3}}", "echo {\u00e9}"]
        answers = analyse_fenced(commands)
        assert [a["behavior"] for a in answers] == ["allow", "allow", "allow", "allow"]
        assert answers[0]["words"] == [["echo", PARTY]]
        assert not any("right after '{'" in b for a in answers for b in a["blockers"])

    def test_it_survives_random_lines_of_braces_digits_and_wide_characters(self) -> None:
        pieces = [
            "{",
            "{",
            "}",
            "1",
            "..",
            " ",
            ";",
            "$",
            "a",
            "'",
            '"',
            "\n",
            "\u00e9",
            "\u540d",
            PARTY,
            "\U00031860",
            "\U0010fffd",
            "\ud83c",
        ]
        rnd = random.Random(20260830)
        commands = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 30))) for _ in range(3000)]
        answers = analyse_fenced(commands)
        assert len(answers) == len(commands)


DEEP = r"""
import sys, threading
from policy.shell import parse

line = sys.stdin.read()
threading.stack_size(1024 * 1024)  # a small worker stack: no C frame per level may be needed
out = []
worker = threading.Thread(target=lambda: out.append(parse(line)))
worker.start()
worker.join()
print(len(out[0].analysis.commands))
"""


class DeepNestingTests:
    def test_it_analyses_a_line_nested_thousands_deep_without_crashing(self) -> None:
        # Subshells piped into subshells: each level adds hidden nodes Node.parent recursed through.
        result = subprocess.run(
            [sys.executable, "-c", DEEP],
            input="(a|" * 8000 + ")" * 8000,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
        assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
        assert int(result.stdout) >= 8000  # every level's command was seen

    def test_it_still_feeds_heredocs_of_nested_statements_to_their_commands(self) -> None:
        parsed = parse("(cat <<A\nx\nA\n) | (bash <<B\nrm -rf ~\nB\n)")
        assert [c.words for c in parsed.analysis.commands] == [("cat",), ("bash",), ("rm", "-rf", "~")]
        assert "bash reads commands from its input" in parsed.analysis.blockers
