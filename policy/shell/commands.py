"""Walk a tree-sitter-bash tree into simple commands plus the flags that block auto-allow."""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import shlex
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

from policy.shell.options import code_option_problem
from policy.shell.words import Word, plain_home, word_of
from policy.shell.wrappers import SHELLS, WRAPPERS, Unwrapped, command_name, shell_payload, strip_wrappers
from policy.shell.writes import REMOVERS, written_paths

_LANGUAGE = Language(tree_sitter_bash.language())
_LOCAL = threading.local()
MAX_DEPTH = 4  # nested ``bash -c "eval '…'"`` payloads before we stop trusting them
# Where the parser misread a line, what it misread is parsed again: at most twice the
# line's length in all, in at most REREADS parses (each may use the parse budget's spare
# reads), and at most GLUED_BRACES brace expansions taken for groups are added, so that
# a line of nested errors (``(a|`` 8,000 times) costs a few parses more. Past that the line
# stays a parse error (never auto-allowed) and the rest meets the rules unread.
REREAD_LINES = 2
REREADS = 16
GLUED_BRACES = 16
GLUED_NAME_BYTES = 256

# Assigning these changes what the *next* command resolves to or loads.
SENSITIVE_VARS = frozenset(
    {
        "PATH",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "DYLD_INSERT_LIBRARIES",
        "IFS",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        # Expanded, ``$(…)`` included, when bash prints a prompt or a ``set -x`` trace.
        "PS0",
        "PS1",
        "PS2",
        "PS4",
        "PYTHONPATH",
        "NODE_OPTIONS",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_EXEC_PATH",
        "PERL5OPT",
        "RUBYOPT",
        "SHELLOPTS",
        # Programs that read these run the command they name (``GIT_PAGER='rm -rf ~' git log``)
        # or load configuration (aliases, pagers, hooks) from where they point.
        "HOME",
        "XDG_CONFIG_HOME",
        "ZDOTDIR",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PERL5LIB",
        "RUBYLIB",
        "NODE_PATH",
        "LESSOPEN",
        "LESSCLOSE",
        "BROWSER",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "DISPLAY",
    }
)
# Whole families: git reads dozens of GIT_* variables that run programs or move its config.
SENSITIVE_VAR_PREFIXES = ("GIT_", "LD_", "DYLD_", "NPM_CONFIG_", "npm_config_")
SENSITIVE_VAR_SUFFIXES = ("PAGER", "EDITOR", "_OPTS", "_OPTIONS", "_COMMAND")


def sensitive_var(name: str) -> bool:
    return (
        name in SENSITIVE_VARS
        or name.startswith(SENSITIVE_VAR_PREFIXES)
        or name.endswith(SENSITIVE_VAR_SUFFIXES)
        or name == "VISUAL"
    )


# find's actions that run a command on each match, up to ``;`` or ``+``.
FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
# find's actions that write the file named by their argument.
FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"})
_REDIRECT_TYPES = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_SKIP_DESTINATION = frozenset({"file_descriptor", "number"})
_INPUT_REDIRECTS = frozenset({"<", "<&"})
_GROUPS = frozenset(
    {
        "subshell",
        "compound_statement",
        "if_statement",
        "while_statement",
        "for_statement",
        "c_style_for_statement",
        "case_statement",
        "negated_command",
    }
)


def parser() -> Parser:
    """One parser per thread: tree-sitter parsers are cheap to reuse, unsafe to share."""
    cached = getattr(_LOCAL, "parser", None)
    if cached is None:
        cached = Parser(_LANGUAGE)
        _LOCAL.parser = cached
    return cached


@dataclass(frozen=True)
class SimpleCommand:
    """One simple command after env prefixes and wrappers were stripped."""

    words: tuple[str, ...]
    raw: str
    dynamic: bool
    dynamic_name: bool
    wrappers: tuple[str, ...] = ()
    assignments: tuple[str, ...] = ()
    ifs_words: tuple[str, ...] = ()
    full_words: tuple[str, ...] = ()
    full_raw: str = ""
    # Argument words only known at run time (``$X``, ``*.py``, ``~bob``), as written.
    unresolved: tuple[str, ...] = ()

    @property
    def unsafe_wrapper(self) -> bool:
        """A wrapper that changes who runs the command, where, or with what arguments.

        An allow rule for ``rm`` must not allow ``sudo rm`` or ``xargs rm``; only the
        wrappers Claude Code itself strips (``timeout``, ``nice``…) are transparent.
        """
        return not all(WRAPPERS[w].safe for w in self.wrappers if w in WRAPPERS)

    @property
    def name(self) -> str:
        return command_name(self.words[0]) if self.words else ""

    @property
    def text(self) -> str:
        return " ".join(self.words)

    # The spellings rules are matched against, as (form, first word) pairs. Computed once
    # per command: analyses are cached, so every later decision on the same command
    # line reuses them (cached_property writes the instance dict; the fields stay frozen).

    @functools.cached_property
    def allow_forms(self) -> tuple[tuple[str, str], ...]:
        """Spellings an allow rule must match: wrappers kept unless they are harmless."""
        forms = [self.full_raw, " ".join(self.full_words)]
        if not self.unsafe_wrapper:
            forms += [self.raw, self.text]
        return keyed_forms(dict.fromkeys(forms))

    @functools.cached_property
    def deny_forms(self) -> tuple[tuple[str, str], ...]:
        """Every spelling a deny rule should see: basenames, $IFS and NFKC variants."""
        forms = [self.raw, self.text, self.full_raw, " ".join(self.full_words)]
        if self.words:
            forms.append(" ".join((command_name(self.words[0]), *self.words[1:])))
        if self.ifs_words:
            ifs = list(self.ifs_words)
            forms.append(" ".join(ifs))
            forms.append(" ".join((command_name(ifs[0]), *ifs[1:])))
        forms += [unicodedata.normalize("NFKC", f) for f in forms]
        # Ordered (not a set), so which of two equally strong rules is reported does
        # not depend on the process's string hash seed.
        return keyed_forms(f for f in dict.fromkeys(forms) if f)


def keyed_forms(forms: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """Pair each command spelling with its first word, the key rules are indexed by."""
    return tuple((form, form.split(None, 1)[0] if form.strip() else "") for form in forms)


@dataclass
class Walk:
    """Mutable accumulator for one analysis (flags are reasons auto-allow is refused)."""

    cwd: str
    commands: list[SimpleCommand] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    redirect_targets: list[tuple[str, bool]] = field(default_factory=list)
    # Files written, created or deleted (output redirects, ``tee``, ``cp`` …), and
    # whether each is only known at run time.
    write_targets: list[tuple[str, bool]] = field(default_factory=list)
    # What ``rm`` and ``rmdir`` remove, as (command name, operand as written).
    removals: list[tuple[str, str]] = field(default_factory=list)
    # Targets of output redirects (``> f``, ``>> f``, ``2> f``, ``&> f``), as written.
    output_redirects: list[str] = field(default_factory=list)
    # A subshell, ``{ … }`` group, loop, ``if`` or ``!``: more than a plain list of commands.
    grouped: bool = False
    parse_error: bool = False
    substitution: bool = False
    eval_like: bool = False
    function_definition: bool = False
    # Here-doc bodies of a redirected statement, by the command they feed.
    statement_heredocs: dict[Node, list[str]] = field(default_factory=dict)
    # Words the parser hung on a redirect that are a command's arguments, by the command.
    statement_operands: dict[Node, list[Word]] = field(default_factory=dict)
    # Bytes the parser may still read again where it misread the line (set at the top),
    # and how many times.
    reread_bytes: int = 0
    rereads: int = REREADS
    # Brace expansions the parser took for groups, still to be added as commands.
    glued_braces: int = GLUED_BRACES
    # The line being walked and where its unescaped backticks are (``_backticks``).
    backticks: tuple[bytes, list[int]] | None = None

    def block(self, reason: str) -> None:
        if reason not in self.blockers:
            self.blockers.append(reason)


def walk_source(source: str, walk: Walk, depth: int = 0) -> None:
    """Parse ``source`` and add its commands and flags to ``walk``."""
    if depth > MAX_DEPTH:
        walk.parse_error = True
        walk.block("shell payloads nested too deeply")
        return
    data = _without_scanner_hazards(source, walk).encode("utf-8", "surrogatepass")
    if depth == 0:
        walk.reread_bytes = REREAD_LINES * len(data)
    tree, finished = bounded_parse(data)
    if b"\n" in data and b"|" in data:
        data, tree, finished = _lines_apart(data, tree, finished, walk)
    root = tree.root_node
    if not finished:
        walk.parse_error = True
        walk.block("the command is too convoluted to analyse; only its start was checked")
    if root.has_error:
        walk.parse_error = True
        walk.block("the command could not be parsed completely")
    stack = [root]
    while stack:
        node = stack.pop()
        _visit(node, data, walk, depth, stack)


def _lines_apart(data: bytes, tree: Tree, finished: bool, walk: Walk) -> tuple[bytes, Tree, bool]:
    """The parse with every line break bash ends a command at read as one.

    tree-sitter-bash 0.25 reads ``a | b | c`` followed by a line that ends in a redirect
    (``d 2>/dev/null``) as one pipeline whose last command is ``c d``: the line break
    between them becomes a space between words, and ``ls | ls | cat`` then ``curl x``
    passed for ``cat curl x``, a read. After ``a | b | c | d 2>/dev/null`` it took the
    next line's words for more of the redirect's destinations. Bash ends a command at a
    line break outside quotes, as at ``;``: the first such break between two of a
    command's words is read as the ``;`` it is, any comment before it on that line
    dropped (a ``;`` there would be part of the comment), and the line parsed again.
    Should the parser still join lines, the line never auto-allows.
    """
    apart = bytearray(data)
    joins = _joined_lines(tree.root_node, data)
    if not joins:
        return data, tree, finished
    for offset, comments in joins:
        for start, end in comments:
            apart[start:end] = b" " * (end - start)
        apart[offset] = ord(";")
    tree, finished = bounded_parse(bytes(apart))
    if _joined_lines(tree.root_node, bytes(apart)):
        walk.parse_error = True
        walk.block("the parser read two lines as one command")
    return bytes(apart), tree, finished


# Nodes bash ends at a line break: a command's words, a redirect's destination (after
# ``a | b | c | d 2>/dev/null`` the parser took the next line's words as more destinations,
# so ``curl evil.sh`` there vanished from the analysis).
_ONE_LINE = frozenset({"command", "file_redirect"})


def _joined_lines(root: Node, data: bytes) -> list[tuple[int, list[tuple[int, int]]]]:
    """Each line break bash ends a command at but the parse does not, with the comments before it.

    A break is the first line break between two of a node's words that is not a ``\\``
    continuation; a comment (which runs to the line's end in bash, ``\\`` included) and
    a backslash ending a word (``a\\\\`` is an escaped one) never continue a line.
    """
    joins: list[tuple[int, list[tuple[int, int]]]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        children = node.children
        if node.type in _ONE_LINE:
            words = [child for child in children if child.type != "comment"]
            comments = [(child.start_byte, child.end_byte) for child in children if child.type == "comment"]
            for before, after in itertools.pairwise(words):
                inside = [(start, end) for start, end in comments if before.end_byte <= start < after.start_byte]
                gap = bytearray(data[before.end_byte : after.start_byte])
                for start, end in inside:
                    gap[start - before.end_byte : end - before.end_byte] = b" " * (end - start)
                at = gap.find(b"\n")
                while at > 0 and gap[at - 1 : at] == b"\\":
                    at = gap.find(b"\n", at + 1)
                if at != -1:
                    offset = before.end_byte + at
                    joins.append((offset, [(start, end) for start, end in inside if end <= offset]))
        stack.extend(children)
    return joins


# tree-sitter's error recovery is quadratic on some inputs: 4,000 unclosed ``a=(`` (12 KB)
# take 0.8 s, and a 256 KB command of them would hold a worker thread for minutes. The
# parser reads its input through a callback, and on such inputs it goes back over what
# it has read again and again (28,000 reads of a 12 KB line, against one read per chunk
# for a clean parse, errors or not). A parse that reads more than a clean one could need
# is stopped there: the parser sees the end of the input, so the tree covers the start
# of the line, whose commands deny rules still see, and the line never auto-allows.
# Counting reads rather than time keeps the decision the same on a busy machine.
PARSE_CHUNK_BYTES = 1024
PARSE_SPARE_READS = 512


def bounded_parse(data: bytes) -> tuple[Tree, bool]:
    """Parse ``data`` within the read budget; the tree and whether the parse got to the end."""
    budget = len(data) // PARSE_CHUNK_BYTES + PARSE_SPARE_READS
    reads = 0
    parsing = True

    def read(offset: int, _point: object) -> bytes:
        # Node.text reads through here too, after the parse: then always serve the bytes.
        nonlocal reads
        if parsing:
            reads += 1
            if reads > budget:
                return b""
        return data[offset : offset + PARSE_CHUNK_BYTES]

    tree = parser().parse(read)
    parsing = False
    return tree, reads <= budget


# tree-sitter-bash 0.25.1's scanner tests the character after "{" (and after "{12..")
# with C isdigit(), which indexes a 384-entry table by the whole code point: past U+00FF
# it reads outside the table and, depending on how the process's memory lies, gets
# noise or a segmentation fault (tree-sitter/tree-sitter-bash#337). Agents send emoji.
_SCANNER_HAZARD = re.compile(r"\{[0-9]*(?:\.\.[0-9]*)?([^\x00-\xff])")


def _without_scanner_hazards(source: str, walk: Walk) -> str:
    """Swap each character the scanner would misread for a Latin-1 stand-in of its kind.

    The rest of the line is still analysed, so deny rules still see its commands; the
    line never auto-allows, since what was parsed is not exactly what was sent.
    """
    if source.isascii() or _SCANNER_HAZARD.search(source) is None:
        return source
    walk.parse_error = True
    walk.block("it has a non-Latin-1 character right after '{', which the parser cannot read safely")
    return _SCANNER_HAZARD.sub(_stand_in, source)


def _stand_in(match: re.Match[str]) -> str:
    # A letter stays a letter for the scanner's iswalpha() checks (``${名}`` is a variable name).
    return match.group(0)[:-1] + ("\u00aa" if match.group(1).isalpha() else "\u00a4")


def _visit(node: Node, data: bytes, walk: Walk, depth: int, stack: list[Node]) -> None:
    kind = node.type
    if kind == "ERROR" or node.is_missing:
        walk.parse_error = True
        walk.block("the command could not be parsed completely")
    if kind in ("ERROR", "compound_statement"):
        _visit_glued_braces(node, data, walk, depth)
    if kind == "comment":
        _visit_comment_in_backticks(node, data, walk, depth)
    if kind == "ERROR":
        _visit_unparsed(node, data, walk, depth)
    if kind in ("command_substitution", "process_substitution"):
        walk.substitution = True
        walk.block("it contains command or process substitution")
    elif kind == "function_definition":
        walk.function_definition = True
        walk.block("it defines a shell function")
    elif kind == "command":
        _visit_command(node, data, walk, depth, stack)
        return
    elif kind in ("declaration_command", "unset_command", "test_command"):
        _visit_keyword_command(node, data, walk)
        _reread_code_in(data[node.start_byte : node.end_byte], walk, depth)
        if kind == "test_command":
            _visit_test_arithmetic(node, data, walk)
    elif kind == "variable_assignment":
        _check_assignment(node, walk)
        value = node.child_by_field_name("value")
        if value is not None and value.type == "raw_string":
            _reread_code_in(data[value.start_byte + 1 : value.end_byte - 1], walk, depth)
    elif kind == "expansion":
        _visit_expansion(node, data, walk, depth)
    elif kind == "arithmetic_expansion" or (kind == "compound_statement" and node.children[0].type == "(("):
        _visit_arithmetic(node, data, walk)
    elif kind == "file_redirect":
        _visit_redirect(node, walk)
    elif kind == "heredoc_redirect":
        _visit_heredoc(node, data, walk, depth)
    elif kind == "redirected_statement":
        _hand_down_heredocs(node, walk)
        _visit_words_after_redirects(node, walk)
    elif kind in _GROUPS:
        walk.grouped = True
    if any(child.type == "&" for child in node.children):
        # Claude Code 2.1.332: what runs in the background runs past the approval.
        walk.block("it uses the & background operator")
    stack.extend(reversed(node.named_children))


def _visit_glued_braces(node: Node, data: bytes, walk: Walk, depth: int) -> None:
    """A ``{`` with no blank after it: no group but a brace expansion, which bash runs.

    ``{rm,-rf,build}`` is ``rm -rf build``; tree-sitter-bash reads a group there (that it
    cannot close, or closes at the word's ``}``). The brace and the word it opens are a
    command whose name is only known at run time, compared with the rules as a pattern.
    """
    for before, brace, after in _triples(node.children):
        if walk.glued_braces <= 0:
            return
        glued = brace.type == "{" and after.start_byte == brace.end_byte
        if glued and not (before is not None and before.type == "{" and before.end_byte == brace.start_byte):
            walk.glued_braces -= 1
            end = min(after.end_byte, brace.start_byte + GLUED_NAME_BYTES)
            name = data[brace.start_byte : end].decode("utf-8", "replace").split(None, 1)[0]
            word = Word(name, True, brace.start_byte, brace.start_byte + len(name.encode()), name)
            _add_command([word], [], [], data, walk, depth)


_ONE_GROUP = re.compile(r"\{([^{}]*,[^{}]*)\}")
_BRACE_GROUP = re.compile(r"(?<!\$)\{[^{}]*(,|\.\.)[^{}]*\}")


def _expanded(word: Word) -> list[str]:
    """The words bash makes of ``word``: its brace group's (``_brace_words``), or itself."""
    if not word.dynamic:
        return [word.value]
    plain = plain_home(word.value)
    return _brace_words(plain) if _BRACE_GROUP.search(plain) else [word.value]


def _brace_words(text: str) -> list[str]:
    """The words bash makes of ``{cat,~/.ssh/id}`` (``cat``, ``~/.ssh/id``).

    Only a word that is one group of plain alternatives is split. Any other stays one
    word only known at run time, taken both for the command's name and for an operand
    (``{cat,~/.ss{h,}/id}`` could read under ``~/.ssh``).
    """
    group = _ONE_GROUP.fullmatch(text)
    if group is None:
        return [text, text]
    words = []
    for alternative in group.group(1).split(","):
        for home in ("${HOME}", "$HOME"):
            if alternative.startswith(home):
                alternative = "~" + alternative[len(home) :]  # as at any word's start
        if alternative:
            words.append(alternative)
    return words or [text, text]


def _triples(nodes: list[Node]) -> Iterable[tuple[Node | None, Node, Node]]:
    """Each node but the last with the one before it (None for the first) and the one after it."""
    if len(nodes) < 2:
        return ()
    return zip([None, *nodes[:-2]], nodes[:-1], nodes[1:], strict=True)


def _may_reread(size: int, walk: Walk, depth: int) -> bool:
    """Whether the re-read budget still has room for ``size`` bytes one level deeper."""
    return depth < MAX_DEPTH and size <= walk.reread_bytes and walk.rereads > 0


def _reread(text: bytes, walk: Walk, depth: int) -> None:
    """Parse ``text``, a part the parser misread, as a line of its own, within the budget."""
    if not _may_reread(len(text), walk, depth):
        return
    walk.reread_bytes -= len(text)
    walk.rereads -= 1
    walk_source(text.decode("utf-8", "replace"), walk, depth + 1)


def _visit_unparsed(node: Node, data: bytes, walk: Walk, depth: int) -> None:
    """The commands in a part tree-sitter could not parse: seen by deny and ask rules.

    When words lie in it outside any command, the text from its second piece to the
    line's end is parsed again, so the commands the error swallowed (all after a stray
    token, and the words of a command it cut in two) are analysed too.
    """
    children = node.children
    if any(child.type in _LOOSE_WORDS for child in children[1:]):
        _reread(data[children[1].start_byte :], walk, depth)
    # Where the parser lost track (backticks paired wrongly), a brace expansion it kept as
    # a word could be a command to bash: each is also taken for one (``{curl,x}``).
    for group in _BRACE_GROUP.finditer(data[node.start_byte : node.end_byte].decode("utf-8", "replace")):
        if walk.glued_braces <= 0:
            return
        walk.glued_braces -= 1
        start = node.start_byte + group.start()
        _add_command(
            [Word(group.group(0), True, start, start + len(group.group(0)), group.group(0))], [], [], data, walk, depth
        )


_LOOSE_WORDS = frozenset({"word", "command_name", "concatenation", "string", "raw_string", "number"})


def _visit_comment_in_backticks(node: Node, data: bytes, walk: Walk, depth: int) -> None:
    """What follows a comment's backtick, where the comment is inside `` `…` ``.

    Bash ends `` `ls # c` `` and `` `# c` `` at the next backtick, so ``&& curl x`` after
    it runs; tree-sitter-bash reads the comment on, past the backtick (as part of the
    substitution, or after an error, as a comment of its own). When an odd number of
    backticks comes before the comment, the line is parsed again with ``:`` for the
    comment (the parser cannot read an empty `` `` ``), as bash reads it (``cat a `#`
    ~/.ssh/id`` reads ``~/.ssh/id``), so deny and ask rules see what follows.
    """
    closing = data.find(b"`", node.start_byte, node.end_byte)
    if closing == -1 or not _may_reread(len(data) - (closing - node.start_byte) + 1, walk, depth):
        return  # checked first: building the line for each of thousands of comments took seconds
    if bisect.bisect_left(_backticks(data, walk), node.start_byte) % 2 == 1:
        _reread(data[: node.start_byte] + b":" + data[closing:], walk, depth)


def _backticks(data: bytes, walk: Walk) -> list[int]:
    """Where ``data``'s unescaped backticks are, found once per line: counting them before
    each comment made a line of thousands of commented backticks take seconds."""
    if walk.backticks is None or walk.backticks[0] is not data:
        walk.backticks = (data, [match.start() for match in _UNESCAPED_BACKTICK.finditer(data)])
    return walk.backticks[1]


_UNESCAPED_BACKTICK = re.compile(rb"(?<!\\)`")
# What bash runs again when it expands ``${…}``: a substitution in a word the parser
# kept as text (``${x:-`curl x`}``), ``@P`` (the value expanded as a prompt is, ``$(…)``
# included), and an index or offset read as arithmetic (``${a[i]}``, ``${x:n}``), which
# evaluates a variable's value as an expression, ``a[$(curl x)]`` included.
_PROMPT_TRANSFORM = re.compile(r"@P\}$")
_SUBSCRIPT = re.compile(r"\$\{[!#]?[A-Za-z_][A-Za-z0-9_]*\[([^\]]*)\]")
_PLAIN_INDEX = re.compile(r"\s*(?:[0-9]+|@|\*)\s*")
_OFFSET = re.compile(r"\$\{[!#]?(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[-*@#?$!])(?:\[[^\]]*\])?:(?![-=?+])(.*)\}$", re.S)
_NAMED = re.compile(r"[A-Za-z_$`]")


def _visit_expansion(node: Node, data: bytes, walk: Walk, depth: int) -> None:
    """``${…}``: what bash evaluates in it that the parser does not show as a command."""
    for child in node.children:
        if child.type in ("command_substitution", "process_substitution", "expansion", "simple_expansion"):
            continue
        text = data[child.start_byte : child.end_byte]
        if _CODE_IN_WORD.search(text):
            walk.substitution = True
            walk.block("it contains command or process substitution")
            _reread_code_in(text, walk, depth)
    raw = data[node.start_byte : node.end_byte].decode("utf-8", "replace")
    if _PROMPT_TRANSFORM.search(raw):
        walk.block("it expands a value as a prompt (${…@P}), which runs the substitutions in it")
    index = _SUBSCRIPT.match(raw)
    offset = _OFFSET.match(raw)
    if (index is not None and not _PLAIN_INDEX.fullmatch(index.group(1))) or (
        offset is not None and _NAMED.search(offset.group(1))
    ):
        walk.block(_EVALUATED)


_EVALUATED = "bash evaluates a variable's value in it as arithmetic, which can run commands (x='a[$(…)]')"
_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_NUMBER = re.compile(r"[+-]?[0-9]+")


def _visit_arithmetic(node: Node, data: bytes, walk: Walk) -> None:
    """``$((…))``, ``$[…]``, ``((…))``: a name in it is a variable whose value is evaluated too."""
    if _NAMED.search(data[node.start_byte : node.end_byte].decode("utf-8", "replace")[2:]):
        walk.block(_EVALUATED)


def _visit_test_arithmetic(node: Node, data: bytes, walk: Walk) -> None:
    """``[[ x -eq 1 ]]`` evaluates both sides as arithmetic, ``[[ -v a[…] ]]`` the index."""
    words = data[node.start_byte : node.end_byte].decode("utf-8", "replace").split()
    for before, word, after in zip(words, words[1:], words[2:], strict=False):
        if word in _ARITHMETIC_TESTS and not (_NUMBER.fullmatch(before) and _NUMBER.fullmatch(after)):
            walk.block(_EVALUATED)
        if word == "-v" and "[" in after:
            walk.block(_EVALUATED)


def _visit_words_after_redirects(statement: Node, walk: Walk) -> None:
    """Words after a redirect's target: the command's arguments to bash, not more targets.

    ``cat README.md 2>/dev/null ~/.ssh/id`` reads ``~/.ssh/id``; tree-sitter-bash takes
    ``~/.ssh/id`` for a second target of ``2>``, so it was neither a read outside nor met
    a Read deny rule. Such a line never auto-allows (as in Claude Code 2.1.332), and the
    words are handed down to the command (the last of a pipeline or list) as operands.
    """
    extra = [
        word
        for child in statement.named_children
        if child.type == "file_redirect"
        for word in child.children_by_field_name("destination")[1:]
    ]
    if not extra:
        return
    walk.block("a redirect has more than one target: the words after it are the command's arguments")
    command = statement.named_children[0]
    while command.type != "command" and command.named_children:
        command = command.named_children[-1]  # the last command of a pipeline or list
    if command.type == "command":
        walk.statement_operands[command] = [word_of(word) for word in extra]


def _hand_down_heredocs(statement: Node, walk: Walk) -> None:
    # tree-sitter hangs ``cmd <<EOF`` redirects on the enclosing statement. Handed down
    # from here because Node.parent walks down from the root: asking every command for
    # its parent made deeply nested lines quadratic (``(a|`` * 8000 took seconds).
    children = statement.named_children
    bodies = [body for c in children if c.type == "heredoc_redirect" for body in _heredoc_bodies(c)]
    if bodies:
        for child in children:
            if child.type == "command":
                walk.statement_heredocs[child] = bodies


# A substitution in a quoted word that bash evaluates later: an index (``a[$(…)]``) that
# ``let``, ``declare``, ``printf -v``, ``read``, ``test -v`` or arithmetic reads, a value
# assigned now and evaluated later (``$((x))``, ``${x@P}``).
_CODE_IN_WORD = re.compile(rb"`|\$\(|[<>]\(")
_CODE_MARKERS = re.compile(rb"[`()\[\]'\"]|\$\(|[<>]\(")


def _reread_code_in(text: bytes, walk: Walk, depth: int) -> None:
    """Each piece of ``text`` between substitution marks, as a line, when it holds one:
    deny and ask rules see ``curl x`` in ``let 'a[$(curl x)]'`` (what runs is not known
    before it runs, so nothing auto-allows on this alone)."""
    if _CODE_IN_WORD.search(text):
        _reread(_CODE_MARKERS.sub(b"\n", text), walk, depth)


def _check_assignment(node: Node, walk: Walk) -> None:
    name_node = node.child_by_field_name("name")
    name = name_node.text.decode("utf-8", "replace") if name_node and name_node.text else ""
    if sensitive_var(name):
        walk.block(f"it sets {name}, which changes how later commands run")


def _visit_keyword_command(node: Node, data: bytes, walk: Walk) -> None:
    first = node.children[0] if node.children else None
    keyword = first.text.decode("utf-8", "replace") if first and first.text else ""
    raw = data[node.start_byte : node.end_byte].decode("utf-8", "replace")
    words = tuple(raw.split())
    walk.commands.append(SimpleCommand(words or (keyword,), raw, False, False))


def _visit_redirect(node: Node, walk: Walk) -> None:
    # The destination field, not the first named child: in ``2> file`` the first named
    # child is the descriptor being redirected, and skipping it as a "descriptor
    # destination" let ``ls 2> ~/.ssh/authorized_keys`` write outside unseen.
    destination = node.child_by_field_name("destination")
    if destination is None:
        return
    operator = next((child.type for child in node.children if not child.is_named), "")
    word = word_of(destination)
    if operator in (">&", "<&") and (destination.type in _SKIP_DESTINATION or word.value == "-"):
        return  # duplicating (2>&1) or closing (>&-) a descriptor writes no file
    values = [word.value]
    if operator == ">&" and "\\" in word.value:
        # Bash removes the quoting of a ``>&`` file's name once more: ``>& ..\\/x`` writes ``../x``.
        walk.block("its >& target has a backslash, which bash removes once more")
        values.append(re.sub(r"\\(.?)", r"\1", word.value, flags=re.S))
    for value in values:
        walk.redirect_targets.append((value, word.dynamic))
        if operator not in _INPUT_REDIRECTS:
            walk.write_targets.append((value, word.unresolved))
            walk.output_redirects.append(value)


def _visit_heredoc(node: Node, data: bytes, walk: Walk, depth: int) -> None:
    """A here-doc: an unquoted one blocks, and the commands its body runs meet the rules.

    - ``<<EOF`` expands ``$…`` and `` `…` `` in its body when it runs; ``<<'EOF'`` does not.
      tree-sitter-bash parses ``$(…)`` there but not `` `…` ``, so a body holding a
      backtick is read again as the double-quoted string it expands like.
    - Bash ends a here-doc only at a line that is its delimiter alone (after tabs, for
      ``<<-``); tree-sitter-bash also ends it at ``EOF && ls # …``, where all the rest of
      the line is body to bash. Then the rest is read as body too, and the line blocks.
    """
    children = node.children
    start = next((child for child in children if child.type == "heredoc_start"), None)
    delimiter = _node_text(start) if start is not None else ""
    unquoted = not any(quote in delimiter for quote in "'\"\\")
    if unquoted:
        walk.block("it has a here-doc with an unquoted delimiter, whose body the shell expands")
    body = next((child for child in children if child.type == "heredoc_body"), None)
    end = next((child for child in children if child.type == "heredoc_end"), None)
    if body is None or end is None:
        return
    alone = _delimiter_alone(end, data, tabs=any(child.type == "<<-" for child in children))
    text = data[body.start_byte : end.start_byte if alone else len(data)]
    if not alone:
        walk.parse_error = True
        walk.block("its here-doc ends at a line that is not the delimiter alone")
    if unquoted and (not alone or b"`" in text):
        _reread(b': "' + text.replace(b'"', b'\\"') + b'"', walk, depth)


def _delimiter_alone(end: Node, data: bytes, *, tabs: bool) -> bool:
    """Whether a here-doc's end is its delimiter alone on its line (after tabs, with ``tabs``)."""
    before = data[data.rfind(b"\n", 0, end.start_byte) + 1 : end.start_byte]
    after = data[end.end_byte : end.end_byte + 1]
    return (before == b"" or (tabs and before.strip(b"\t") == b"")) and after in (b"", b"\n")


def _visit_command(node: Node, data: bytes, walk: Walk, depth: int, stack: list[Node]) -> None:
    words: list[Word] = []
    assignments: list[str] = []
    heredocs: list[str] = []
    for child in node.named_children:
        kind = child.type
        if kind == "variable_assignment":
            _check_assignment(child, walk)
            assignments.append(_node_text(child))
            stack.extend(reversed(child.named_children))
        elif kind in _REDIRECT_TYPES:
            if kind == "heredoc_redirect":
                heredocs.extend(_heredoc_bodies(child))
            stack.append(child)
        elif kind == "command_name":
            inner = child.named_children[0] if child.named_children else child
            words.append(word_of(inner))
            stack.extend(reversed(child.named_children))
        else:
            words.append(word_of(child))
            stack.append(child)
    heredocs.extend(walk.statement_heredocs.pop(node, ()))
    words.extend(walk.statement_operands.pop(node, ()))
    _add_command(words, assignments, heredocs, data, walk, depth)


def _node_text(node: Node) -> str:
    return node.text.decode("utf-8", "replace") if node.text else ""


def _heredoc_bodies(node: Node) -> list[str]:
    return [_node_text(c) for c in node.named_children if c.type == "heredoc_body"]


def _add_command(
    words: list[Word],
    assignments: list[str],
    heredocs: list[str],
    data: bytes,
    walk: Walk,
    depth: int,
) -> None:
    if not words:
        return
    # A brace expansion makes more words (``{cat,~/.ssh/id}``, ``time {cat,~/.ssh/id}``).
    words = [
        Word(value, True, word.start, word.end, value) if value is not word.value else word
        for word in words
        for value in _expanded(word)
    ]
    unwrapped = strip_wrappers(words)
    real, wrappers, env_assignments = unwrapped.words, unwrapped.wrappers, unwrapped.assignments
    for assignment in env_assignments:
        if sensitive_var(assignment.split("=", 1)[0]):
            walk.block(f"it sets {assignment.split('=', 1)[0]} for the command")
    _follow_wrapped(unwrapped, walk, depth)
    raw = data[real[0].start : real[-1].end].decode("utf-8", "replace")
    if any(w.ifs_value != w.value for w in real):
        walk.block("it uses $IFS to hide word boundaries")
    command = SimpleCommand(
        words=tuple(w.value for w in real),
        raw=raw,
        dynamic=any(w.dynamic for w in real),
        dynamic_name=real[0].dynamic or real[0].glob,
        wrappers=tuple(wrappers),
        assignments=tuple(assignments + env_assignments),
        ifs_words=tuple(" ".join(w.ifs_value for w in real).split()),
        full_words=tuple(w.value for w in words),
        full_raw=data[words[0].start : words[-1].end].decode("utf-8", "replace"),
        unresolved=tuple(w.value for w in real[1:] if w.unresolved),
    )
    walk.commands.append(command)
    if command.dynamic_name:
        walk.block("the command name is only known at run time")
    for written in written_paths(command.name, real):
        walk.write_targets.append((written.value, written.unresolved))
        if command.name in REMOVERS:
            walk.removals.append((command.name, written.value))
    # The real command's options, and the wrappers' own: ``xargs`` runs what it reads.
    for name, words_seen in ((command.name, command.words), *((w, (w,)) for w in wrappers)):
        code_option = code_option_problem(name, words_seen)
        if code_option:
            walk.block(code_option)
    _check_unicode(command, walk)
    _follow_payloads(real, heredocs, walk, depth)


def _follow_wrapped(unwrapped: Unwrapped, walk: Walk, depth: int) -> None:
    """What the wrappers themselves run or write, beyond the command they wrap."""
    names = ", ".join(dict.fromkeys(unwrapped.wrappers)) or command_name(unwrapped.words[0].value)
    for problem in unwrapped.problems:
        walk.block(problem)
    for payload in unwrapped.payloads:
        walk.eval_like = True
        walk.block(f"it runs a shell string given to {names}")
        walk_source(payload, walk, depth + 1)
    for alternative in unwrapped.alternatives:
        walk_source(" ".join(shlex.quote(w.value) for w in alternative), walk, depth + 1)
    for target in unwrapped.writes:
        walk.redirect_targets.append((target.value, target.dynamic))
        walk.write_targets.append((target.value, target.unresolved))


# Builtins that evaluate an index in a quoted word (``let 'a[$(curl x)]'``).
_EVALUATING_BUILTINS = frozenset({"let", "printf", "read", "mapfile", "readarray", "test", "["})


def _follow_payloads(real: list[Word], heredocs: list[str], walk: Walk, depth: int) -> None:
    """Parse what ``eval``, ``bash -c`` and here-docs fed to a shell would run."""
    name = command_name(real[0].value)
    payload: str | None = None
    if name == "eval":
        walk.eval_like = True
        walk.block("it uses eval")
        payload = " ".join(w.value for w in real[1:])
    elif name in ("trap", "alias"):
        # ``trap 'curl x' EXIT`` runs its action later; ``alias c='curl x'`` runs its value as ``c``.
        if name == "alias":
            actions = [w.value.split("=", 1)[1] for w in real[1:] if "=" in w.value]
        else:
            actions = [w.value for w in real[1:] if w.value[:1] != "-"][:1]
        actions = [action for action in actions if action]
        if actions:
            walk.eval_like = True
            walk.block(f"it uses {name}, whose command runs later")
            payload = "\n".join(actions)
    elif name in _EVALUATING_BUILTINS:
        for argument in real[1:]:
            _reread_code_in(argument.value.encode("utf-8", "surrogatepass"), walk, depth)
        if name in ("mapfile", "readarray"):
            values = [w.value for w in real]
            for index, value in enumerate(values[:-1]):
                if value == "-C":
                    walk.eval_like = True
                    walk.block(f"{name} -C runs a callback")
                    payload = values[index + 1]
    elif name in SHELLS:
        word = shell_payload(real)
        if word is not None:
            walk.eval_like = True
            walk.block(f"it runs a {name} -c payload")
            payload = word.value
        elif heredocs or len(real) == 1:
            walk.eval_like = True
            walk.block(f"{name} reads commands from its input")
            payload = "\n".join(heredocs) or None
    if payload:
        walk_source(payload, walk, depth + 1)
    _follow_option_actions(name, real, walk, depth)


def _follow_option_actions(name: str, real: list[Word], walk: Walk, depth: int) -> None:
    """Commands and writes hidden in options: ``find -exec``/``-delete``, ``git --output``.

    A ``Bash(find:*)`` rule allows looking for files, not running ``rm`` on each of
    them: the command after ``-exec`` is checked as a command of its own, ``-delete``
    as an ``rm``, and files that ``-fprint`` or ``git log --output`` write as redirects.
    """
    values = [w.value for w in real]
    if name == "find":
        index = 1
        while index < len(values):
            option = values[index]
            if option in FIND_EXEC:
                end = next((i for i in range(index + 1, len(values)) if values[i] in (";", "+")), len(values))
                if end > index + 1:
                    walk_source(" ".join(shlex.quote(v) for v in values[index + 1 : end]), walk, depth + 1)
                index = end
            elif option == "-delete":
                walk_source("rm -- {}", walk, depth + 1)
            elif option in FIND_WRITES and index + 1 < len(real):
                walk.redirect_targets.append((real[index + 1].value, real[index + 1].dynamic))
            index += 1
    elif name == "git":
        for index, word in enumerate(real):
            if word.value.startswith("--output="):
                walk.redirect_targets.append((word.value.split("=", 1)[1], word.dynamic))
            elif word.value == "--output" and index + 1 < len(real):
                walk.redirect_targets.append((real[index + 1].value, real[index + 1].dynamic))


def _check_unicode(command: SimpleCommand, walk: Walk) -> None:
    # Look-alike letters in a command name (a Cyrillic letter inside 'rm') and invisible
    # characters anywhere must never match an allow rule by accident.
    if command.words and not command.words[0].isascii():
        walk.block("the command name contains non-ASCII characters")
    for char in command.raw:
        if char in "\t\n":
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Cf", "Co", "Cs") or (category == "Zs" and char != " "):
            walk.block("the command contains invisible or control characters")
            return
