"""The request card: one template, rendered for the pages and for every push.

The card is the one Jinja2 template of the project (`gatehouse.jinja`): it is rendered
for every call each dashboard hears, where Django's engine spent more than the rest of
the card's read put together. Its escaping is Django's own.

Also how a tool call's input is shown to a person: a shell command highlighted, edits as
a diff, a fetch as its URL, MCP input as JSON. Everything here comes from an agent and is
untrusted, so every piece is escaped before it is wrapped in markup; nothing is ever
marked safe without passing through `escape` first.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from django.http import HttpRequest
from django.template import engines
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from approvals import changes, permissions, questions, quorum, selectors, why
from approvals.calls import CALL_CONTEXT
from approvals.invisible import (
    blank_marker,
    count_hidden,
    reveal,
    reveal_whitespace,
    spelled_out,
    split_lines,
    trailing_marker,
)
from approvals.models import PermissionRequest

# Past this many lines a preview says how much it left out; a 1 MiB Write must not make
# the queue unusable on a phone.
MAX_LINES = 400
# A card shows this many lines of a command or diff, then a "Show N more lines" toggle:
# the whole input is on the card, and what is folded away says how much it is.
PREVIEW_LINES = 12

EDIT_TOOLS = {"Edit", "MultiEdit", "Write", "NotebookEdit"}


def render_card(
    request: PermissionRequest, user: Any, *, decision: Any = None, http_request: HttpRequest | None = None
) -> SafeString:
    """HTML of one request card as `user` sees it (buttons only for approvers).

    - `decision`: the finished request's outcome when the caller read it with the request
      (`selectors.joined_decision`); read here otherwise.
    - Without `http_request` (a push) the card's form carries no CSRF token and the page's
      script adds it on submit.
    """
    if decision is None and request.state != "pending":
        decision = selectors.decision_for(request)
    return _render(card_context(request, user, decision=decision), http_request)


def render_card_as(
    request: PermissionRequest, *, can_decide: bool, decision: Any = None, http_request: HttpRequest | None = None
) -> SafeString:
    """HTML of one request card for anyone allowed to see it, with or without the decide form.

    - The card depends on the person only through `can_decide`, so the relay renders it
      once per event and role and shares it between every socket of the team.
    - `can_decide` is honoured only while the request is pending.
    """
    return _render(_context(request, can_decide=can_decide, decision=decision), http_request)


def render_pending_card_variants(
    request: PermissionRequest, *, for_viewers: bool
) -> tuple[SafeString, SafeString | None]:
    """A pending card with the decide form and, when `for_viewers`, without it.

    - The card is read once (its explanation, what changed since, its progress) for both,
      and rendered once: only its parts that depend on `can_decide` (the batch
      attributes, the decide form or the viewer's note) are rendered per variant.
    """
    card = _context(request, can_decide=True, decision=None)
    if not for_viewers:
        return _render(card, None), None
    viewers = {**card, "can_decide": False}
    pieces = _SLOT.split(_template(CARD_TEMPLATE).render({"card": {**card, "slots": True}}))
    if sorted(pieces[1::2]) != sorted(SLOT_TEMPLATES):  # cannot happen: a slot comes from the template only
        return _render(card, None), _render(viewers, None)
    return _fill(pieces, card), _fill(pieces, viewers)


CARD_TEMPLATE = "approvals/card.html"
# The parts of a card that depend on `can_decide`. Rendered with `slots`, the card has a
# marker in each one's place; no text of a call can make one, since everything from a
# call is escaped and a marker starts with "<".
SLOT_TEMPLATES = {"batch": "approvals/card_batch.html", "decide": "approvals/card_decide.html"}
_SLOT = re.compile(r"<!--gatehouse:(batch|decide)-->")


def _fill(pieces: list[str], card: dict[str, Any]) -> SafeString:
    """The card from its pieces (text, slot name, text, …), each slot's part rendered for `card`."""
    return mark_safe(  # noqa: S308 - the template escapes everything it writes (gatehouse.jinja)
        "".join(
            _template(SLOT_TEMPLATES[piece]).render({"card": card}) if n % 2 else piece
            for n, piece in enumerate(pieces)
        )
    )


def _render(card: dict[str, Any], http_request: HttpRequest | None) -> SafeString:
    html = _template(CARD_TEMPLATE).render({"card": card}, request=http_request)
    return mark_safe(html)  # noqa: S308 - the template escapes everything it writes (gatehouse.jinja)


def _template(name: str) -> Any:
    """A card template (the Jinja2 engine's; compiled once, then kept by the engine)."""
    return engines["jinja2"].get_template(name)


def card_context(request: PermissionRequest, user: Any, *, decision: Any = None) -> dict[str, Any]:
    can_decide = request.state == "pending" and permissions.can_decide(user, request)
    return _context(request, can_decide=can_decide, decision=decision)


def _context(request: PermissionRequest, *, can_decide: bool, decision: Any) -> dict[str, Any]:
    evaluation = request.evaluation or {}
    suggested = [str(rule) for rule in evaluation.get("suggested_rules") or []]
    return {
        **_explanation(request, evaluation),
        "req": request,
        "decision": decision,
        "can_decide": request.state == "pending" and can_decide,
        "input_html": render_input(request.tool_name, request.tool_input),
        # A reported hook rewrote the input: the person sees both, the input as sent first.
        "updated_input_html": _updated_input_html(request, evaluation),
        "destructive_warning": evaluation.get("destructive_warning"),
        "warnings": [w for w in evaluation.get("warnings") or [] if w != evaluation.get("destructive_warning")],
        "suggested_rules": suggested,
        # What "Always allow" / "Allow for session" will save, shown before the tap;
        # None: this call can only be allowed once.
        "rule_to_save": selectors.grant_rule_for(request),
        "claude_suggestions": _claude_suggestions(request.permission_suggestions),
        # What differs from the last call like this that a person allowed (pending only).
        "since_allowed": _since_allowed(request) if request.state == "pending" else None,
        # Identical pending calls share this key; the queue offers to decide them together.
        "batch_key": selectors.same_call_key(request) if request.state == "pending" else "",
        # An AskUserQuestion call: the card asks its questions instead of Allow / Deny.
        "questions": questions.questions_of(request.tool_name, request.tool_input),
        "answers": _answers(decision),
        # "1 of 2 — alice approved" and the ladder's steps; None without quorum or ladder.
        "progress": _progress(request),
        # Every key the template reads is here, None where there is nothing: a lookup that
        # fails costs Django's template engine an exception and a dir() of the object.
        "call_context": _call_context(request),
        "outcome": _outcome(decision),
        "slots": False,
    }


def _call_context(request: PermissionRequest) -> dict[str, Any]:
    """The call's context with every key a call may carry (the prompt, the subagent, the effort)."""
    context = request.call_context if isinstance(request.call_context, dict) else {}
    return {key: context.get(key) for key in CALL_CONTEXT}


def _outcome(decision: Any) -> dict[str, Any]:
    """What the card's outcome line says beyond allow or deny: the agent stopped, a rule saved."""
    reason = getattr(decision, "reason", None)
    reason = reason if isinstance(reason, dict) else {}
    return {"interrupt": reason.get("interrupt"), "saved_rule": reason.get("saved_rule")}


def _answers(decision: Any) -> list[tuple[str, str]]:
    """The answers a person gave to an AskUserQuestion call, as (question, label) pairs."""
    updated = getattr(decision, "updated_input", None)
    answers = updated.get("answers") if isinstance(updated, dict) else None
    if not isinstance(answers, dict):
        return []
    return [(str(question), str(label)) for question, label in answers.items()]


def _progress(request: PermissionRequest) -> dict[str, Any] | None:
    found = quorum.progress_of(request)
    return found.to_dict() if found is not None else None


def _explanation(request: PermissionRequest, evaluation: dict[str, Any]) -> dict[str, Any]:
    """Why it was asked, what the call is in a few words, and what to be wary of."""
    url = request.tool_input.get("url") if isinstance(request.tool_input, dict) else None
    private_host = why.private_fetch_host(url) if request.tool_name == "WebFetch" and isinstance(url, str) else None
    return {
        "why": _sentence(why.why_asked(evaluation, request.tool_name, request.tool_input)),
        # Names the request in every control's accessible name: "Allow once: Bash npm publish".
        "label": spelled_out(f"{request.tool_name} {why.subject(request.tool_name, request.tool_input)}"),
        "batch_label": _batch_label(request),
        "private_host": private_host,
        "hidden_count": _hidden_in(request.tool_input),
    }


def _since_allowed(request: PermissionRequest) -> dict[str, Any] | None:
    """The last allow of a call like this one, and what changed since: None if there is none."""
    allowed = selectors.last_allowed_like(request)
    if allowed is None:
        return None
    before = allowed.request
    found = changes.changes_between(
        {
            "tool_name": before.tool_name,
            "tool_input": before.tool_input,
            "cwd": before.cwd,
            "session_id": before.session_id,
            "mode": before.permission_mode,
        },
        {
            "tool_name": request.tool_name,
            "tool_input": request.tool_input,
            "cwd": request.cwd,
            "session_id": request.session_id,
            "mode": request.permission_mode,
        },
    )
    return {"decision": allowed, "changes": found, "diff_html": [_changed_line(line) for c in found for line in c.diff]}


def _changed_line(line: str) -> SafeString:
    css = "d-add" if line.startswith("+") else "d-del" if line.startswith("-") else "d-ctx"
    return format_html('<span class="{}">{}</span>', css, whole_words([("", line, False)]))


def _batch_label(request: PermissionRequest) -> str:
    """What a batch bar says its calls are: "Bash pytest -q from ci-bot, session 4f2c…"."""
    subject = spelled_out(f"{request.tool_name} {why.subject(request.tool_name, request.tool_input)}")
    where = f", session {spelled_out(request.session_id[:20])}" if request.session_id else ""
    return f"{subject} from {spelled_out(request.agent.name)}{where}"


def _sentence(parts: list[why.Part]) -> SafeString:
    return format_html_join("", "{}", ((_part(kind, text),) for kind, text in parts))


def _part(kind: str, text: str) -> SafeString:
    return format_html("<code>{}</code>", reveal(text)) if kind == "code" else reveal(text)


def _hidden_in(value: Any) -> int:
    """Hidden characters in every string of the input, keys included."""
    if isinstance(value, str):
        return count_hidden(value)
    if isinstance(value, dict):
        return sum(_hidden_in(k) + _hidden_in(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_hidden_in(item) for item in value)
    return 0


def _updated_input_html(request: PermissionRequest, evaluation: dict[str, Any]) -> SafeString | None:
    updated = evaluation.get("updated_input")
    if not isinstance(updated, dict) or updated == request.tool_input:
        return None
    return render_input(request.tool_name, updated)


def _claude_suggestions(suggestions: Any) -> list[str]:
    """Claude Code's own `permission_suggestions`, as readable rule strings."""
    found: list[str] = []
    for item in suggestions if isinstance(suggestions, list) else []:
        if not isinstance(item, dict):
            continue
        for rule in item.get("rules") or []:
            if isinstance(rule, dict) and rule.get("toolName"):
                content = rule.get("ruleContent")
                found.append(f"{rule['toolName']}({content})" if content else str(rule["toolName"]))
        if item.get("type") == "setMode" and item.get("mode"):
            found.append(f"switch mode to {item['mode']}")
    return found


# --- input rendering --------------------------------------------------------------------


def render_input(tool_name: str, tool_input: Any) -> SafeString:
    """The call's input the way a person reads it (always escaped)."""
    if not isinstance(tool_input, dict):
        return _json_block(tool_input)
    if tool_name == "Bash" and isinstance(tool_input.get("command"), str):
        return _bash(tool_input)
    if tool_name in EDIT_TOOLS:
        return _edit(tool_name, tool_input)
    if tool_name == "WebFetch" and isinstance(tool_input.get("url"), str):
        return _web_fetch(tool_input)
    if tool_name.startswith("mcp__"):
        server, _, tool = tool_name[5:].partition("__")
        head = format_html(
            '<p class="mcp">MCP server <code>{}</code> tool <code>{}</code></p>', reveal(server), reveal(tool)
        )
        return format_html("{}{}", head, _json_block(tool_input))
    return _fields(tool_input)


# What separates words on a card: a line breaks only here unless one word alone is wider.
WORD_GAP = re.compile(r"[ \t\n]+")


def whole_words(pieces: list[tuple[str, str, bool]], *, line_start: bool = True) -> SafeString:
    """Text pieces `(css class or "", text, mark long blank runs)` with each word kept whole.

    - A word (a run between spaces, tabs and newlines, across pieces: `FOO="$HOME/x"` is one)
      goes in one `<span class="w">`, an inline block (static/app.css): a browser breaks
      `--query=x` after its dashes, so a word that fits on a line moves to the next one whole;
      one wider than the card still breaks anywhere (no horizontal scroll). The characters
      are the input's own: nothing is added to what a person reads or copies.
    - Each piece keeps its class on its part of every word; the blanks between words are
      left bare (escaped, long runs as markers when the piece asks for it; a leading run
      counts as indentation when `line_start`).
    """
    out: list[str] = []
    word: list[str] = []
    offset = 0

    def flush() -> None:
        if word:
            out.append(format_html('<span class="w">{}</span>', mark_safe("".join(word))))  # noqa: S308 - escaped parts
            word.clear()

    def piece(css: str, text: str) -> str:
        return format_html('<span class="{}">{}</span>', css, reveal(text)) if css else reveal(text)

    for css, text, mark_runs in pieces:
        position = 0
        for gap in WORD_GAP.finditer(text):
            if gap.start() > position:
                word.append(piece(css, text[position : gap.start()]))
            flush()
            blank = gap.group()
            indent = line_start and offset + gap.start() == 0
            out.append(reveal_whitespace(blank, line_start=indent) if mark_runs else escape(blank))
            position = gap.end()
        if position < len(text):
            word.append(piece(css, text[position:]))
        offset += len(text)
    flush()
    return mark_safe("".join(out))  # noqa: S308 - every part went through escape/format_html


def _json_block(value: Any) -> SafeString:
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    return format_html('<pre class="json">{}</pre>', whole_words([("", _clip(text), False)]))


def _clip(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= MAX_LINES:
        return text
    return "\n".join(lines[:MAX_LINES]) + f"\n… {len(lines) - MAX_LINES} more lines"


def _fields(tool_input: dict[str, Any]) -> SafeString:
    """Simple tools (Read, Glob, Grep, WebSearch…): a definition list of their fields."""
    rows = []
    for key, value in tool_input.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        rows.append((reveal(key), whole_words([("", _clip(text), True)])))
    if not rows:
        return mark_safe('<p class="muted">(no input)</p>')  # constant markup
    return format_html('<dl class="fields">{}</dl>', format_html_join("", "<dt>{}</dt><dd><code>{}</code></dd>", rows))


def _web_fetch(tool_input: dict[str, Any]) -> SafeString:
    prompt = tool_input.get("prompt")
    extra = format_html('<p class="prompt">{}</p>', reveal(prompt)) if isinstance(prompt, str) and prompt else ""
    url = reveal(tool_input["url"])
    return format_html('<p class="url"><span class="label">URL</span> <code>{}</code></p>{}', url, extra)


# A display tokenizer, not a parser: the engine analyses commands with tree-sitter-bash;
# here we only need to colour words so a person spots `rm -rf` and pipes at a glance.
SHELL_TOKEN = re.compile(
    r"""
     (?P<space>\s+)
    |(?P<string>'[^']*'?|"(?:\\.|[^"\\])*"?)
    |(?P<subst>\$\(|`)
    |(?P<var>\$\{[^}]*\}?|\$\w+|\$[?!#@*0-9$])
    |(?P<op>&&|\|\||;;|\d?>>|\d?>&\d|\d?>|<<<|<<|<|[|;&()])
    |(?P<word>[^\s'"|;&()<>`$]+|\$)
    """,
    re.VERBOSE,
)
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
COMMAND_BREAKS = {"&&", "||", ";", ";;", "|", "&", "(", "$(", "`"}


def highlight_shell(command: str, *, line_start: bool = True, comment: str = "") -> SafeString:
    """Wrap each shell token of one line in an escaped span: commands, flags, strings, operators.

    - Hidden characters and long space runs come out as visible markers.
    - `comment`: the line's trailing `# comment`, shown muted.
    - Each word is kept whole on a wrapped line (`whole_words`).
    """
    parts: list[tuple[str, str, bool]] = []
    at_command = True
    position = 0
    for match in SHELL_TOKEN.finditer(command):
        if match.start() != position:  # anything the tokenizer skipped stays as text
            parts.append(("", command[position : match.start()], False))
        position = match.end()
        kind = match.lastgroup or "word"
        text = match.group()
        css = "" if kind == "space" else kind
        if kind == "word":
            if at_command and ASSIGNMENT.match(text):
                css = "var"
            elif at_command:
                css, at_command = "cmd", False
            else:
                css = "flag" if text.startswith("-") else "arg"
        elif kind in ("op", "subst"):
            at_command = text in COMMAND_BREAKS
        parts.append((f"sh-{css}" if css else "", text, kind == "space"))
    parts.append(("", command[position:], False))
    if comment:
        parts.append(("sh-comment", comment, True))
    return whole_words(parts, line_start=line_start)


def highlight_shell_line(line: str) -> SafeString:
    comment_at = _comment_start(line)
    if comment_at is None:
        return highlight_shell(line)
    return highlight_shell(line[:comment_at], comment=line[comment_at:])


def _comment_start(line: str) -> int | None:
    """Where a `#` comment starts on this line, outside quotes and at a word start."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return index
    return None


def _bash(tool_input: dict[str, Any]) -> SafeString:
    description = tool_input.get("description")
    extra = (
        format_html('<p class="desc">{}</p>', reveal(description))
        if isinstance(description, str) and description
        else ""
    )
    flags = []
    if tool_input.get("run_in_background"):
        flags.append("runs in background")
    if tool_input.get("timeout"):
        flags.append(f"timeout {tool_input['timeout']} ms")
    flag_html = format_html('<p class="muted">{}</p>', " · ".join(flags)) if flags else ""
    return format_html("{}{}{}", shell_block(tool_input["command"]), extra, flag_html)


def shell_block(command: str) -> SafeString:
    """The whole command, highlighted: blank runs, a blank tail and hidden characters marked."""
    lines = split_lines(command)
    rows = [blank_marker(item) if isinstance(item, int) else highlight_shell_line(item) for item in lines.shown]
    if lines.trailing_newlines > 1:
        rows.append(trailing_marker(lines.trailing_newlines))
    return _folded("shell", rows, "\n")


def _folded(css: str, rows: list[SafeString], joiner: str) -> SafeString:
    """Rows in a <pre>: the first PREVIEW_LINES shown, the rest behind "Show N more lines".

    - Past MAX_LINES the card says how many it left out: a 1 MiB Write must not make the
      queue unusable on a phone; the API and the exports carry the whole input.
    """
    shown, left_out = rows[:MAX_LINES], len(rows) - MAX_LINES
    head, tail = shown[:PREVIEW_LINES], shown[PREVIEW_LINES:]
    html = format_html('<pre class="{}"><code>{}</code></pre>', css, _join(joiner, head))
    if tail:
        html = format_html(
            '{}<details class="tail"><summary>Show {} more line{}</summary>'
            '<pre class="{}"><code>{}</code></pre></details>',
            html,
            len(tail),
            "" if len(tail) == 1 else "s",
            css,
            _join(joiner, tail),
        )
    if left_out > 0:
        html = format_html('{}<p class="more">… {} more lines not shown on the card</p>', html, left_out)
    return html


def _join(joiner: str, rows: list[SafeString]) -> SafeString:
    return mark_safe(joiner.join(rows))  # noqa: S308 - every row was escaped when it was built


def _edit(tool_name: str, tool_input: dict[str, Any]) -> SafeString:
    path = str(tool_input.get("file_path") or tool_input.get("notebook_path") or "")
    head = format_html('<p class="path"><span class="label">{}</span> <code>{}</code></p>', tool_name, path)
    if tool_name == "Edit":
        body = _diff(tool_input.get("old_string"), tool_input.get("new_string"), path)
        if tool_input.get("replace_all"):
            body = format_html('{}<p class="muted">replaces every occurrence</p>', body)
    elif tool_name == "MultiEdit":
        raw = tool_input.get("edits")
        edits: list[Any] = raw if isinstance(raw, list) else []
        body = format_html_join(
            "",
            "{}",
            ((_diff(e.get("old_string"), e.get("new_string"), path),) for e in edits if isinstance(e, dict)),
        )
    elif tool_name == "Write":
        body = _diff("", tool_input.get("content"), path, new_file=True)
    else:
        body = _diff("", tool_input.get("new_source"), path, new_file=True)
    return format_html("{}{}", head, body)


def _diff(old: Any, new: Any, path: str, *, new_file: bool = False) -> SafeString:
    """A unified diff (difflib) as escaped lines with add/remove classes."""
    old_lines = old.splitlines() if isinstance(old, str) else []
    new_lines = new.splitlines() if isinstance(new, str) else []
    if new_file:
        lines = [f"+{line}" for line in new_lines]
    else:
        lines = list(difflib.unified_diff(old_lines, new_lines, lineterm="", n=3))[2:]
    if not lines:
        return mark_safe('<p class="muted">(no change)</p>')  # constant markup
    rows = [
        format_html('<span class="{}">{}</span>', _diff_class(line), whole_words([("", line, False)])) for line in lines
    ]
    return _folded("diff", rows, "")


def _diff_class(line: str) -> str:
    if line.startswith("@@"):
        return "d-hunk"
    if line.startswith("+"):
        return "d-add"
    if line.startswith("-"):
        return "d-del"
    return "d-ctx"
