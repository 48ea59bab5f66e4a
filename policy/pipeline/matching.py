"""Find the strongest rule of one behavior that matches a call.

This runs two or three times per decision over every rule of the tool, so it is
written as plain loops over pre-built indexes: command spellings are computed once
per (cached) command, path roots once per decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from policy.paths import HARMLESS_DEVICES, NormalPath, inside_any, is_inside, looks_like_path
from policy.pipeline.context import CallContext
from policy.pipeline.toolcheck import symlink_escape
from policy.pipeline.unasked import read_only_command
from policy.rules.compiled import CompiledRule, CompiledRules, RuleIndex
from policy.shell import ShellAnalysis
from policy.shell.commands import keyed_forms
from policy.shell.environment import safe_assignment
from policy.shell.unasked import read_operands

_CONTENT_FIELDS = {"Task": "subagent_type", "Skill": "skill", "SlashCommand": "command"}

# Commands that print their operands and open none of them: ``echo $HOME`` names no file.
# Their redirects are still checked like any other.
_TEXT_ONLY = frozenset({"echo", "printf"})


def strongest(candidates: Iterable[CompiledRule | None]) -> CompiledRule | None:
    best: CompiledRule | None = None
    for rule in candidates:
        if rule is not None and (best is None or rule.rank > best.rank):
            best = rule
    return best


def _stronger(best: CompiledRule | None, rule: CompiledRule | None) -> CompiledRule | None:
    """``strongest`` of two: on a tie the one found first is kept."""
    if rule is not None and (best is None or rule.rank > best.rank):
        return rule
    return best


def find_rule(rules: CompiledRules, behavior: str, ctx: CallContext) -> CompiledRule | None:
    """Return the strongest-source rule of ``behavior`` matching the call, or None."""
    if behavior == "allow" and symlink_escape(ctx) is not None:
        # Claude Code 2.1.332 asks for a write through a symlink out of the working
        # directories under any allow rule, the bare ``Edit`` and ``Bash`` included.
        return None
    best: CompiledRule | None = None
    content = behavior != "allow" or ctx.analysis is None or not _beyond_content_rules(rules, ctx)
    for key in ctx.rule_keys:
        index = rules.lookup(key, behavior)
        if index is None:
            continue
        if behavior != "allow" or _whole_tool_allows(key, ctx):
            best = _stronger(best, _first_active(index.whole_tool, ctx.now))
        if content:
            best = _stronger(best, _content_match(index, behavior, ctx, rules))
    if behavior != "allow" and ctx.analysis is not None:
        best = _stronger(best, _bash_path_rule(rules, behavior, ctx))
    if behavior == "deny" and ctx.spec.kind == "edit":
        best = _stronger(best, _read_deny_on_edit(rules, ctx))
    return best


def _read_deny_on_edit(rules: CompiledRules, ctx: CallContext) -> CompiledRule | None:
    """Claude Code 2.1.332: a file a Read deny rule covers cannot be written or edited either.

    Its content rules only (``Read(.env)``, ``Read(./secrets/**)``), as Claude Code
    matches them; Read ask rules do not reach edits.
    """
    index = rules.lookup("Read", "deny")
    return _path_match(index, "deny", ctx, ctx.paths) if index is not None else None


def _whole_tool_allows(key: str, ctx: CallContext) -> bool:
    """Claude Code 2.1.332: a bare ``Edit`` allows Edit, not Write; a bare ``Read`` not Glob or Grep.

    Content rules (``Edit(src/**)``, ``Read(//srv/**)``) cover the whole family; so do
    ``Bash(…)`` rules Monitor's command, which a bare ``Bash`` allow does not.
    """
    return ctx.spec.kind not in ("read", "edit", "bash") or key == ctx.spec.name


def _first_active(rules: Iterable[CompiledRule], now: datetime) -> CompiledRule | None:
    for rule in rules:
        if rule.expires_at is None or rule.expires_at > now:
            return rule
    return None


def _content_match(index: RuleIndex, behavior: str, ctx: CallContext, rules: CompiledRules) -> CompiledRule | None:
    if not index.other and not index.by_word:
        return None
    kind = ctx.spec.kind
    if kind == "bash":
        return _bash_match(index, behavior, ctx, rules)
    if kind in ("read", "edit"):
        # As in Claude Code 2.1.332, a Read deny of ``src/**`` covers a search of ``src``
        # itself, and ``Read(~/.ssh/**)`` a Glob of ``~/.ssh``.
        found = _path_match(index, behavior, ctx, ctx.paths, directories=kind == "read" and behavior != "allow")
        if found is None and behavior == "allow" and kind == "read" and ctx.spec.name != "Read":
            found = _search_allow(index, ctx)
        return found
    if kind == "web":
        host = ctx.host or ""
        return _first_active((r for r in index.other if r.domain is not None and r.domain.matches(host)), ctx.now)
    field_name = _CONTENT_FIELDS.get(ctx.spec.name)
    value = ctx.tool_input.get(field_name) if field_name else None
    if not isinstance(value, str):
        return None
    return _command_rules(index, keyed_forms([value]), ctx.now)


# --- Bash -----------------------------------------------------------------------


def _bash_match(index: RuleIndex, behavior: str, ctx: CallContext, rules: CompiledRules) -> CompiledRule | None:
    analysis = ctx.analysis
    if analysis is None or not analysis.commands:
        return None
    if behavior == "allow":
        # An allow rule allows the whole line only if it allows every simple command
        # and nothing in the line (substitution, eval, redirects…) blocks auto-allow.
        if not analysis.can_auto_allow:
            return None
        first: CompiledRule | None = None
        for position, command in enumerate(analysis.commands):
            rule = _command_rules(index, command.allow_forms, ctx.now)
            if rule is None and _read_only_part(analysis, position, rules, ctx):
                continue  # Claude Code 2.1.332 needs no rule for a read-only part
            if rule is None:
                return None
            first = first or rule
        return first
    # One denied (or asked) part is enough for the whole line.
    best: CompiledRule | None = None
    for command in analysis.commands:
        best = _stronger(best, _command_rules(index, command.deny_forms, ctx.now))
    return best


def _read_only_part(analysis: ShellAnalysis, position: int, rules: CompiledRules, ctx: CallContext) -> bool:
    """A read-only command of a plain line, reading where it may (working directories, Read allow rules)."""
    if analysis.grouped:
        return False
    return read_only_command(analysis, position, ctx, lambda path: _path_allowed(rules, "Read", path, ctx))


def _beyond_content_rules(rules: CompiledRules, ctx: CallContext) -> bool:
    """What Claude Code 2.1.332 asks about under any ``Bash(…)`` content rule.

    - a ``VAR=`` prefix other than the few it strips (``FOO=1 ls`` under ``Bash(ls *)``);
    - a path the line names outside the working directories (also as seen from where
      ``cd`` moved it) that no Read allow rule covers, or a file it writes there that no
      Edit allow rule covers: ``cat ../notes.txt`` under ``Bash(cat:*)``, ``touch ~/x``
      under ``Bash(touch:*)``;
    - an output redirect to a file no Edit allow rule covers (``echo hi > out.txt`` under
      ``Bash(echo:*)``), unless acceptEdits lets it write there.

    The bare ``Bash`` rule still allows these.
    """
    analysis = ctx.analysis
    assert analysis is not None
    for command in analysis.commands:
        if not all(safe_assignment(a) for a in command.assignments):
            return True
    if any(not _redirect_allowed(rules, target, ctx) for target in analysis.output_redirects):
        return True
    moved = bool(analysis.directories)
    written = {target for target, _ in analysis.write_targets}
    operands = [w for c in analysis.commands if c.words and c.words[0] not in _TEXT_ONLY for w in c.words[1:]]
    words = [w for w in operands if looks_like_path(w) or (moved and w[:1] != "-")]
    words += [t for t in analysis.redirect_paths if t not in HARMLESS_DEVICES]
    for word in dict.fromkeys(words):
        family = "Edit" if word in written else "Read"
        for spelling in analysis.relative_spellings(word):
            path = ctx.resolver.normalise(spelling)
            if not inside_any(path, ctx.roots) and not _path_allowed(rules, family, path, ctx):
                return True
    return False


def _redirect_allowed(rules: CompiledRules, target: str, ctx: CallContext) -> bool:
    """``> target`` under a ``Bash(…)`` rule: a device, or a write acceptEdits or an Edit allow rule permits."""
    if target in HARMLESS_DEVICES:
        return True
    assert ctx.analysis is not None
    index = rules.lookup("Edit", "allow")
    for spelling in ctx.analysis.relative_spellings(target):
        path = ctx.resolver.normalise(spelling)
        if ctx.mode == "acceptEdits" and inside_any(path, ctx.roots):
            continue
        if index is None or not path.known or _path_match(index, "allow", ctx, [path]) is None:
            return False
    return True


def _path_allowed(rules: CompiledRules, family: str, path: NormalPath, ctx: CallContext) -> bool:
    """Each spelling of ``path`` lies in a working directory or under a matching allow rule.

    As in Claude Code, ``Read(//srv/data/**)`` covers ``/srv/data`` itself (``ls /srv/data``).
    """
    index = rules.lookup(family, "allow")
    if index is None or not path.known:
        return False
    for spelling in path.variants():
        if any(is_inside(spelling, root) for root in ctx.roots):
            continue
        candidates = [NormalPath(p, p) for p in (spelling, _in_directory(spelling))]
        if not any(_path_match(index, "allow", ctx, [c]) is not None for c in candidates):
            return False
    return True


def _command_rules(index: RuleIndex, forms: Sequence[tuple[str, str]], now: datetime) -> CompiledRule | None:
    """The strongest active rule matching any spelling; ``forms`` pair it with its head."""
    best: CompiledRule | None = None
    by_word, other = index.by_word, index.other
    for form, head in forms:
        bucket = by_word.get(head)
        if bucket:
            best = _stronger(best, _first_command_match(bucket, form, now))
        if other:
            best = _stronger(best, _first_command_match(other, form, now))
    return best


def _first_command_match(bucket: list[CompiledRule], form: str, now: datetime) -> CompiledRule | None:
    for rule in bucket:  # strongest source first
        command = rule.command
        if command is not None and command.fullmatch(form) and (rule.expires_at is None or rule.expires_at > now):
            return rule
    return None


def _bash_path_rule(rules: CompiledRules, behavior: str, ctx: CallContext) -> CompiledRule | None:
    """Apply Read/Edit deny and ask rules to paths a shell command names.

    - A Read rule meets every operand, also as a directory searched (``grep -r x src``
      under ``Read(./src/**)``), as in Claude Code 2.1.332.
    - An Edit rule meets every operand but what a read-only command reads: ``cat
      docs/guide.md`` edits nothing (Claude Code lets it through ``Edit(./docs/**)``), while
      ``vim docs/guide.md`` or ``sed -i … docs/guide.md`` may.
    """
    if ctx.analysis is None:
        return None
    found: list[CompiledRule | None] = []
    read = rules.lookup("Read", behavior)
    if read is not None and read.other:
        found.append(_path_match(read, behavior, ctx, ctx.shell_operand_paths(), directories=True))
    edit = rules.lookup("Edit", behavior)
    if edit is not None and edit.other:
        found.append(_path_match(edit, behavior, ctx, _edited_operand_paths(ctx.analysis, ctx)))
    return strongest(found)


def _edited_operand_paths(analysis: ShellAnalysis, ctx: CallContext) -> list[NormalPath]:
    """Every operand of a command that is not read-only, and every file the line writes."""
    words = [
        word
        for command in analysis.commands
        if read_operands(command) is None
        for word in command.words[1:]
        if word and not word.startswith("-")
    ]
    words += [target for target, _ in analysis.write_targets]
    return [ctx.resolver.normalise(s) for word in dict.fromkeys(words) for s in analysis.relative_spellings(word)]


# --- Paths ----------------------------------------------------------------------


def _path_match(
    index: RuleIndex, behavior: str, ctx: CallContext, paths: list[NormalPath], directories: bool = False
) -> CompiledRule | None:
    """The first rule of ``index`` matching ``paths``; ``directories``: also as directories searched."""
    if not paths or not index.path_buckets:
        return None
    spellings = [v for p in paths for v in p.variants()]
    if directories:
        spellings += [_in_directory(v) for v in spellings]
    candidates = _candidates(index, ctx, spellings[:1] if behavior == "allow" else spellings)
    for rule in candidates:
        if not rule.active(ctx.now):
            continue
        # deny/ask match any spelling of any path; allow needs every spelling of
        # every path (a symlink into a denied place must not be allowed by its name).
        results = (_path_matches(rule, v, ctx) for v in spellings)
        if all(results) if behavior == "allow" else any(results):
            return rule
    return None


def _search_allow(index: RuleIndex, ctx: CallContext) -> CompiledRule | None:
    """Glob, Grep, LS: ``Read(//srv/data/**)`` allows a search of ``/srv/data`` itself.

    Each searched path lies in a working directory or, as a directory, under the rule
    (as written and where the agent reported it leads), as in Claude Code 2.1.332.
    """
    found: CompiledRule | None = None
    for path in ctx.paths:
        if inside_any(path, ctx.roots):
            continue
        if not path.known:
            return None
        directory = NormalPath(_in_directory(path.lexical), _in_directory(path.real))
        rule = _path_match(index, "allow", ctx, [directory])
        if rule is None:
            return None
        found = found or rule
    return found


def _in_directory(path: str) -> str:
    """A name no real file has in ``path``: what covers everything in a directory covers it."""
    return path.rstrip("/") + "/\x00"


def _candidates(index: RuleIndex, ctx: CallContext, spellings: list[str]) -> list[CompiledRule]:
    """Rules that could match: same root and first segment, or unanchored patterns."""
    buckets = index.path_buckets
    found: dict[int, CompiledRule] = {}
    for spelling in spellings:
        for key in ctx.bucket_keys(spelling):
            for rule in buckets.get(key, ()):
                found.setdefault(id(rule), rule)
    if len(found) < 2:
        return list(found.values())
    return sorted(found.values(), key=lambda r: -r.rank)


def _path_matches(rule: CompiledRule, path: str, ctx: CallContext) -> bool:
    assert rule.path is not None
    relative = ctx.relative_to_roots(path)[rule.path.root]
    return relative is not None and rule.path.match(relative)
