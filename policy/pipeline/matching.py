"""Find the strongest rule of one behavior that matches a call."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from policy.paths import NormalPath, is_inside
from policy.pipeline.context import CallContext
from policy.rules.compiled import CompiledRule, CompiledRules, RuleIndex
from policy.shell.commands import SimpleCommand
from policy.shell.wrappers import command_name

_CONTENT_FIELDS = {"Task": "subagent_type", "Skill": "skill", "SlashCommand": "command"}


def strongest(candidates: Iterable[CompiledRule | None]) -> CompiledRule | None:
    best: CompiledRule | None = None
    for rule in candidates:
        if rule is not None and (best is None or rule.rank > best.rank):
            best = rule
    return best


def find_rule(rules: CompiledRules, behavior: str, ctx: CallContext) -> CompiledRule | None:
    """Return the strongest-source rule of ``behavior`` matching the call, or None."""
    found: list[CompiledRule | None] = []
    for key in ctx.rule_keys:
        index = rules.lookup(key, behavior)
        if index is None:
            continue
        found.append(_first_active(index.whole_tool, ctx))
        found.append(_content_match(index, behavior, ctx))
    if behavior != "allow" and ctx.analysis is not None:
        found.append(_bash_path_rule(rules, behavior, ctx))
    return strongest(found)


def _first_active(rules: Iterable[CompiledRule], ctx: CallContext) -> CompiledRule | None:
    for rule in rules:
        if rule.active(ctx.now):
            return rule
    return None


def _content_match(index: RuleIndex, behavior: str, ctx: CallContext) -> CompiledRule | None:
    if not index.other and not index.by_word:
        return None
    kind = ctx.spec.kind
    if kind == "bash":
        return _bash_match(index, behavior, ctx)
    if kind in ("read", "edit"):
        return _path_match(index, behavior, ctx, ctx.paths)
    if kind == "web":
        host = ctx.host or ""
        return _first_active(
            (r for r in index.other if r.domain is not None and r.domain.matches(host)), ctx
        )
    field_name = _CONTENT_FIELDS.get(ctx.spec.name)
    value = ctx.tool_input.get(field_name) if field_name else None
    if not isinstance(value, str):
        return None
    return _command_rules(index, [value], ctx)


# --- Bash -----------------------------------------------------------------------


def _bash_match(index: RuleIndex, behavior: str, ctx: CallContext) -> CompiledRule | None:
    analysis = ctx.analysis
    if analysis is None or not analysis.commands:
        return None
    if behavior == "allow":
        # An allow rule allows the whole line only if it allows every simple command
        # and nothing in the line (substitution, eval, redirects…) blocks auto-allow.
        if not analysis.can_auto_allow:
            return None
        matched: list[CompiledRule] = []
        for command in analysis.commands:
            rule = _command_rules(index, allow_forms(command), ctx)
            if rule is None:
                return None
            matched.append(rule)
        return matched[0]
    # One denied (or asked) part is enough for the whole line.
    return strongest(_command_rules(index, deny_forms(c), ctx) for c in analysis.commands)


def allow_forms(command: SimpleCommand) -> list[str]:
    forms = [command.full_raw, " ".join(command.full_words)]
    if not command.unsafe_wrapper:
        forms += [command.raw, command.text]
    return list(dict.fromkeys(forms))


def deny_forms(command: SimpleCommand) -> list[str]:
    """Every spelling a deny rule should see: basenames, $IFS and NFKC variants."""
    forms = {command.raw, command.text, command.full_raw, " ".join(command.full_words)}
    if command.words:
        forms.add(" ".join((command_name(command.words[0]), *command.words[1:])))
    if command.ifs_words:
        ifs = list(command.ifs_words)
        forms.add(" ".join(ifs))
        forms.add(" ".join((command_name(ifs[0]), *ifs[1:])))
    forms |= {unicodedata.normalize("NFKC", f) for f in list(forms)}
    return [f for f in forms if f]


def _command_rules(index: RuleIndex, forms: list[str], ctx: CallContext) -> CompiledRule | None:
    found: list[CompiledRule | None] = []
    for form in forms:
        head = form.split(None, 1)[0] if form.strip() else ""
        for bucket in (index.by_word.get(head, ()), index.other):
            found.append(_first_active(
                (r for r in bucket if r.command is not None and r.command.regex.fullmatch(form)),
                ctx,
            ))
    return strongest(found)


def _bash_path_rule(rules: CompiledRules, behavior: str, ctx: CallContext) -> CompiledRule | None:
    """Apply Read/Edit deny and ask rules to paths a shell command names."""
    indexes = [i for i in (rules.lookup("Read", behavior), rules.lookup("Edit", behavior))
               if i is not None and i.other]
    if not indexes or ctx.analysis is None:
        return None
    paths = ctx.shell_operand_paths()
    if not paths:
        return None
    return strongest(_path_match(i, behavior, ctx, paths) for i in indexes)


# --- Paths ----------------------------------------------------------------------


def _path_match(
    index: RuleIndex, behavior: str, ctx: CallContext, paths: list[NormalPath]
) -> CompiledRule | None:
    if not paths or not index.path_buckets:
        return None
    spellings = [v for p in paths for v in p.variants()]
    candidates = _candidates(index, ctx, spellings[0] if behavior == "allow" else None, spellings)
    for rule in candidates:
        if not rule.active(ctx.now):
            continue
        # deny/ask match any spelling of any path; allow needs every spelling of
        # every path (a symlink into a denied place must not be allowed by its name).
        results = (_path_matches(rule, v, ctx) for v in spellings)
        if (all(results) if behavior == "allow" else any(results)):
            return rule
    return None


def _candidates(
    index: RuleIndex, ctx: CallContext, only: str | None, spellings: list[str]
) -> list[CompiledRule]:
    """Rules that could match: same root and first segment, or unanchored patterns."""
    found: dict[int, CompiledRule] = {}
    for spelling in [only] if only is not None else spellings:
        for root_kind in ("abs", "home", "cwd"):
            relative = _relative(spelling, root_kind, ctx)
            if relative is None:
                continue
            first = relative.split("/", 1)[0]
            for key in ((root_kind, first), (root_kind, "")):
                for rule in index.path_buckets.get(key, ()):
                    found.setdefault(id(rule), rule)
    return sorted(found.values(), key=lambda r: -r.rank)


def _relative(path: str, root_kind: str, ctx: CallContext) -> str | None:
    root = {"abs": "/", "home": ctx.home, "cwd": ctx.project_root}[root_kind]
    if not is_inside(path, root):
        return None
    relative = path[1:] if root == "/" else path[len(root) + 1 :]
    return relative or None


def _path_matches(rule: CompiledRule, path: str, ctx: CallContext) -> bool:
    assert rule.path is not None
    relative = _relative(path, rule.path.root, ctx)
    return relative is not None and rule.path.regex.match(relative) is not None
