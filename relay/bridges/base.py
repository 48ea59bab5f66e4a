"""What every chat bridge shares: the announcer contract, signed buttons, presses, a send queue.

A bridge (Telegram, Slack, a future Discord) subclasses `ChatBridge` and implements three
transport methods — `post_card`, `edit_card`, `post_notice` — plus its own inbound parser.
Everything about the race lives here once: who may press, the one door into the race
(`relay.race.answer`), "already decided by X via Y", and keeping every posted message in
step with the request's fate. Bridges never import each other.
"""

from __future__ import annotations

import base64
import difflib
import hmac
import json
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils.crypto import salted_hmac
from prometheus_client import Counter

from approvals import invisible, permissions, questions, quorum
from approvals import selectors as approval_selectors
from approvals import services as approval_services
from approvals.models import AuditKind, Decision, PermissionRequest, RequestState
from approvals.services import Answer, AuditUnavailable, DecideResult, ServiceError
from relay import race
from relay.bridges import selectors, services
from relay.masking import MAX_MASKED_CHARS, mask, mask_secrets
from relay.models import SurfaceMessage

log = logging.getLogger(__name__)

REFUSED_PRESSES = Counter(
    "gatehouse_chat_refused_presses_total",
    "Button presses refused because the chat user may not decide that request.",
    ["surface"],
)
APPLIED_PRESSES = Counter(
    "gatehouse_chat_presses_total", "Button presses that reached the race, by outcome.", ["surface", "outcome"]
)

# One letter per button keeps the signed token inside Telegram's 64-byte callback_data.
ACTIONS: dict[str, tuple[str, str, str]] = {
    "o": ("allow", "once", "Allow once"),
    "s": ("allow", "session", "Allow for session"),
    "a": ("allow", "always", "Always allow"),
    "d": ("deny", "once", "Deny"),
}
# An AskUserQuestion call with one single-choice question is answered on a chat card by
# one button per option: action "0" picks its first option, "3" its fourth.
ANSWER_ACTIONS = "0123"
VALUE_PREFIX = "g1"
MAC_BYTES = 15  # 120 bits, 20 base64 characters: forging one is out of reach


# --- signed action tokens -----------------------------------------------------------------


def _mac(surface: str, body: str) -> str:
    digest = salted_hmac("gatehouse.bridges.action", f"{surface}:{body}", algorithm="sha256").digest()
    return base64.urlsafe_b64encode(digest[:MAC_BYTES]).decode()


def sign_action(surface: str, action: str, request_id: uuid.UUID | str) -> str:
    """A button's payload: the action and request, bound together by an HMAC of SECRET_KEY.

    - 55 bytes, under Telegram's 64-byte callback_data limit.
    """
    if action not in ACTIONS and action not in ANSWER_ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    body = f"{action}{uuid.UUID(str(request_id)).hex}"
    return f"{VALUE_PREFIX}{body}{_mac(surface, body)}"


def verify_action(surface: str, token: str) -> tuple[str, str] | None:
    """(action, request id) of a genuine token for this surface, else None."""
    if not isinstance(token, str) or len(token) != 2 + 1 + 32 + 20 or not token.startswith(VALUE_PREFIX):
        return None
    body, mac = token[2:35], token[35:]
    if not hmac.compare_digest(mac, _mac(surface, body)):
        return None
    action, hex_id = body[0], body[1:]
    if action not in ACTIONS and action not in ANSWER_ACTIONS:
        return None
    try:
        return action, str(uuid.UUID(hex=hex_id))
    except ValueError:
        return None


# --- what a card says -----------------------------------------------------------------------


@dataclass(frozen=True)
class Excerpt:
    """A readable slice of a tool's input: a shell command, a diff, or pretty JSON."""

    kind: str  # "code" | "diff" | "text"
    body: str
    language: str = ""
    truncated: bool = False
    masked: bool = False  # secrets were masked (relay.masking)
    hidden: int = 0  # hidden characters in the whole input (approvals.invisible), counted by `card_excerpt`
    more_chars: int = 0  # what a card left out: characters and lines past its cut
    more_lines: int = 0


EXCERPT_LIMIT = 1200
# How much of an input each chat card shows (Telegram's message holds 4,096 characters,
# a Slack section 3,000); a press of Allow is checked against the same card.
CARD_LIMITS = {"telegram": EXCERPT_LIMIT, "slack": 2500}


def excerpt_for(tool_name: str, tool_input: Any, limit: int = EXCERPT_LIMIT) -> Excerpt:
    """The readable slice of an input a phone may show: secrets masked, then cut to `limit`.

    - Masked before it is cut, so a cut can never leave half a secret unmasked.
    """
    whole = _excerpt(tool_name, tool_input)
    masked = mask_secrets(whole.body)
    return _cut(Excerpt(whole.kind, masked.text, whole.language, masked=masked.changed), limit)


def card_excerpt(tool_name: str, tool_input: Any, limit: int = EXCERPT_LIMIT) -> Excerpt:
    """The excerpt a chat card shows: secrets masked, then made visible as on the web card
    (`approvals.invisible.shown_text`: hidden characters as ⟨NAME⟩, space runs as a "␣" count, blank
    runs collapsed, trailing newlines counted), cut at about `limit` with what was left counted.
    """
    whole = _excerpt(tool_name, tool_input)
    masked = mask_secrets(whole.body)
    text = masked.text
    beyond_chars = beyond_lines = 0
    if len(whole.body) > MAX_MASKED_CHARS:  # masking kept the first part only, ending in "…"
        text = text.removesuffix("…")
        beyond_chars = len(whole.body) - MAX_MASKED_CHARS
        beyond_lines = whole.body.count("\n", MAX_MASKED_CHARS)
    shown = invisible.shown_text(text, limit)
    return Excerpt(
        whole.kind,
        shown.text,
        whole.language,
        truncated=shown.cut or bool(beyond_chars),
        masked=masked.changed,
        hidden=shown.hidden + invisible.count_hidden(whole.body[MAX_MASKED_CHARS:]),
        more_chars=shown.more_chars + beyond_chars,
        more_lines=shown.more_lines + beyond_lines,
    )


def cut_cue(excerpt: Excerpt) -> str:
    """What a cut card says under its excerpt: how much it left out, and where to read it all."""
    if not excerpt.truncated:
        return ""
    parts = []
    if excerpt.more_lines > 1:
        parts.append(f"{excerpt.more_lines:,} more lines")
    parts.append(f"{excerpt.more_chars:,} more characters")
    return f"… {', '.join(parts)} — open the dashboard to read all"


def allow_withheld(*, destructive: bool, cut: bool, masked: bool, hidden: int) -> str:
    """Why a surface showing only an excerpt of a call (a chat card, a notification) may not
    offer one-tap Allow; "" when it may. A person approves what they saw: the whole input,
    nothing masked, no character that renders as nothing. Deny and "open in Gatehouse" stay.
    """
    if destructive:
        return "destructive"
    if cut:
        return "input too long to show whole"
    if masked:
        return "secrets masked"
    if hidden:
        return "hidden characters"
    return ""


def chat_allow_withheld(request: PermissionRequest, surface: str) -> str:
    """Why the `surface` chat card of `request` offers no Allow ("" when it does): its excerpt
    cut, secrets masked in it, or a hidden character in the input, cwd or saved rule. A
    destructive call keeps Allow on a chat card, where the warning and the whole input show."""
    excerpt = card_excerpt(request.tool_name, request.tool_input, CARD_LIMITS.get(surface, EXCERPT_LIMIT))
    grant = approval_selectors.grant_rule_for(request) or ""
    hidden = excerpt.hidden + invisible.count_hidden(request.cwd or "") + invisible.count_hidden(grant)
    return allow_withheld(destructive=False, cut=excerpt.truncated, masked=excerpt.masked, hidden=hidden)


def chat_question(request: PermissionRequest) -> questions.Question | None:
    """The question a chat card's option buttons answer: an AskUserQuestion call's only one,
    single-choice, with at most four options. Others are answered in Gatehouse."""
    found = questions.questions_of(request.tool_name, request.tool_input)
    if len(found) != 1 or found[0].multi or not 0 < len(found[0].options) <= len(ANSWER_ACTIONS):
        return None
    return found[0]


def action_label(request: PermissionRequest | None, action: str) -> str:
    """A button's text: the option's label for an answer, else the action's name."""
    if action in ANSWER_ACTIONS:
        question = chat_question(request) if request is not None else None
        index = ANSWER_ACTIONS.index(action)
        return question.labels[index] if question is not None and index < len(question.labels) else "Answer"
    return ACTIONS[action][2]


def _excerpt(tool_name: str, tool_input: Any) -> Excerpt:
    asked = questions.questions_of(tool_name, tool_input)
    if asked:
        lines = []
        for question in asked:
            lines.append(question.text + (" (choose any)" if question.multi else ""))
            lines += [
                f"• {label}" + (f" — {description}" if description else "") for label, description in question.options
            ]
        return Excerpt("text", "\n".join(lines))
    tool_input = tool_input if isinstance(tool_input, dict) else {"input": tool_input}
    if tool_name == "Bash" and isinstance(tool_input.get("command"), str):
        return Excerpt("code", tool_input["command"], "bash")
    if tool_name in ("Edit", "MultiEdit"):
        edits = tool_input.get("edits") if tool_name == "MultiEdit" else [tool_input]
        if isinstance(edits, list):
            return Excerpt("diff", _diff(str(tool_input.get("file_path", "")), edits), "diff")
    if tool_name == "Write" and isinstance(tool_input.get("content"), str):
        body = f"{tool_input.get('file_path', '')}\n{tool_input['content']}"
        return Excerpt("code", body)
    if tool_name == "WebFetch" and isinstance(tool_input.get("url"), str):
        return Excerpt("text", tool_input["url"])
    return Excerpt("code", json.dumps(tool_input, indent=2, ensure_ascii=False, default=str), "json")


def _diff(path: str, edits: list[Any]) -> str:
    lines = [f"--- {path}", f"+++ {path}"]
    for edit in edits:
        if not isinstance(edit, dict):
            continue
        old = str(edit.get("old_string", "")).splitlines()
        new = str(edit.get("new_string", "")).splitlines()
        lines.extend(list(difflib.unified_diff(old, new, lineterm="", n=1))[2:])
    return "\n".join(lines)


def _cut(excerpt: Excerpt, limit: int) -> Excerpt:
    if len(excerpt.body) <= limit:
        return excerpt
    cut = excerpt.body[:limit].rstrip() + "\n…"
    return Excerpt(excerpt.kind, cut, excerpt.language, truncated=True, masked=excerpt.masked)


def grant_shown(request: PermissionRequest) -> str:
    """The rule "Always allow" would save, as a card may show it (secrets masked); "" if none."""
    grant = approval_selectors.grant_rule_for(request)
    return invisible.spelled_out(mask(grant)) if grant else ""


def cwd_shown(request: PermissionRequest) -> str:
    return invisible.spelled_out(mask(request.cwd)) if request.cwd else ""


def request_url(request_id: uuid.UUID | str) -> str:
    return f"{settings.PUBLIC_URL}/requests/{request_id}/"


def destructive_warning(request: PermissionRequest) -> str:
    warning = (request.evaluation or {}).get("destructive_warning")
    return str(warning) if warning else ""


def already_decided_text(request: PermissionRequest, decision: Decision | None, holder: str = "") -> str:
    """What a loser of the race is told: "Already decided by alice via web (allowed)."."""
    text = request.outcome_sentence(decision, holder=holder, late=True)
    return f"{text[:1].upper()}{text[1:]}."


def progress_lines(request: PermissionRequest) -> list[str]:
    """The quorum's progress ("1 of 2 — alice approved") and the ladder's steps, for a chat card."""
    progress = quorum.progress_of(request)
    if progress is None:
        return []
    lines = [f"Approvals: {progress.sentence()}"] if progress.required > 1 else []
    return lines + [step[:1].upper() + step[1:] for step in progress.steps]


NUDGES = {
    AuditKind.REMINDER: "⏰ Reminder: this call is still waiting for a person",
    AuditKind.ESCALATION: "🚨 Escalated to {group}: this call is still waiting for a person",
}


def nudge_text(request: PermissionRequest, row: Decision) -> str:
    """The message a ladder step posts under the card, so the people it names are notified."""
    text = NUDGES[AuditKind(row.kind)].format(group=(row.reason or {}).get("group") or "on call")
    progress = quorum.progress_of(request)
    if progress is not None and progress.required > 1:
        text += f" ({progress.sentence()})"
    return f"{text}: {request.tool_name} from {request.agent.name}."


OUTCOME_ICONS = {"expired": "⌛", "cancelled": "↩️", "allow": "✅", "deny": "⛔"}


def outcome_text(request: PermissionRequest, decision: Decision) -> str:
    """One line for the edited card: the model's outcome sentence, an icon, and what was saved or said."""
    text = request.outcome_sentence(decision)
    icon = OUTCOME_ICONS.get(request.state) or OUTCOME_ICONS.get(decision.behavior, "")
    line = f"{icon} {text[:1].upper()}{text[1:]}"
    allowed = request.state == RequestState.DECIDED and decision.behavior == "allow"
    saved = (decision.reason or {}).get("saved_rule")
    if allowed and saved:
        line += f" · rule saved: {saved}"
    custom = decision.message and not decision.message.startswith("Denied by")
    if request.state == RequestState.DECIDED and not allowed and decision.surface != "engine" and custom:
        line += f" — “{decision.message}”"
    return line + "."


# --- presses --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Press:
    """A chat user's button press (or deny reason), parsed and verified by the bridge."""

    surface: str
    external_id: str
    display: str
    request_id: str
    action: str
    message: str = ""


@dataclass(frozen=True)
class PressOutcome:
    applied: bool  # this press decided the request
    refused: bool  # the presser may not decide it
    text: str  # the toast / ephemeral reply for the presser
    request: PermissionRequest | None = None


def _answer(press: Press, user: Any, decided_by: str, request: PermissionRequest) -> DecideResult:
    if press.action in ANSWER_ACTIONS:
        question = chat_question(request)
        index = ANSWER_ACTIONS.index(press.action)
        if question is None or index >= len(question.labels):
            raise ServiceError("This question is answered in Gatehouse, not here.")
        answers = {question.text: question.labels[index]}
        return race.answer(
            press.request_id,
            Answer(behavior="allow", surface=press.surface, user=user, decided_by=decided_by, answers=answers),
        )
    behavior, remember, _label = ACTIONS[press.action]
    if behavior == "allow" and chat_allow_withheld(request, press.surface):
        # The card never offered Allow: the person has not seen the whole call.
        raise ServiceError("Allow is not offered here: open the dashboard to read all and decide there.")
    return race.answer(
        press.request_id,
        Answer(
            behavior=behavior,
            surface=press.surface,
            user=user,
            decided_by=decided_by,
            message=press.message,
            remember=remember,
        ),
    )


ApproversFor = Callable[[int], tuple[str, ...]]


def authorize(press: Press, approvers: tuple[str, ...], request: PermissionRequest) -> tuple[bool, Any]:
    """(allowed, linked user): listed among the approvers of the request's team and, if the
    account's link to a person is proven, that person is an approver of the team.

    - `approvers` is the request's team's list (its chat route), never another team's: a
      listed approver of team A decides nothing of team B.
    """
    if press.external_id not in approvers:
        return False, None
    user = selectors.user_for_chat(press.surface, press.external_id)
    if user is not None and not permissions.can_decide(user, request):
        return False, user
    return True, user


def refuse(press: Press, why: str) -> PressOutcome:
    # The audit trail of refused presses: one structured log line and a counter.
    REFUSED_PRESSES.labels(press.surface).inc()
    log.warning(
        "chat press refused surface=%s external_id=%s display=%s request=%s action=%s why=%s",
        press.surface,
        press.external_id,
        press.display,
        press.request_id,
        press.action,
        why,
    )
    return PressOutcome(False, True, "You are not allowed to decide this request, so nothing happened.")


def check_press(press: Press, approvers_for: ApproversFor) -> tuple[PressOutcome | None, PermissionRequest | None, Any]:
    """Whether a verified press may go on: (the outcome that ends it here, or None; the request;
    the linked user).

    - `approvers_for(team_id)`: the chat ids that may decide that team's asks.
    - Deny asks for a reason before it decides; this is the check it makes before asking.
    """
    request = approval_selectors.request_get(press.request_id)
    if request is None:
        return PressOutcome(False, False, "This request no longer exists."), None, None
    allowed, user = authorize(press, approvers_for(request.team_id), request)
    if not allowed:
        why = "not an approver of this team" if user is not None else "not in this team's approvers list"
        return refuse(press, why), request, user
    if request.state != RequestState.PENDING:
        APPLIED_PRESSES.labels(press.surface, "late").inc()
        decided = already_decided_text(request, approval_selectors.decision_for(request))
        return PressOutcome(False, False, decided, request), request, user
    return None, request, user


def apply_press(press: Press, approvers_for: ApproversFor) -> PressOutcome:
    """Send one verified press through the race's single door and say how it went."""
    stop, request, user = check_press(press, approvers_for)
    if stop is not None:
        return stop
    decided_by = user.get_username() if user is not None else f"{press.display or press.external_id} ({press.surface})"
    try:
        assert request is not None
        result = _answer(press, user, decided_by, request)
    except AuditUnavailable:
        return PressOutcome(False, False, "Gatehouse could not record this decision; please try again.", request)
    except ServiceError as exc:
        return PressOutcome(False, False, str(exc), request)
    if not result.won:
        APPLIED_PRESSES.labels(press.surface, "late").inc()
        return PressOutcome(
            False, False, already_decided_text(result.request, result.decision, result.holder), result.request
        )
    APPLIED_PRESSES.labels(press.surface, "won").inc()
    if result.decision is None and result.vote is not None:
        return PressOutcome(True, False, f"Approved: {result.progress}.", result.request)
    return PressOutcome(True, False, f"{action_label(request, press.action)}: done.", result.request)


LINK_USAGE = "Send /link followed by the code on your Gatehouse profile page, e.g. /link ABCD-1234."


def apply_link(surface: str, external_id: str, code: str) -> str:
    """Prove a chat account's link with the code it sent; the sentence to answer with."""
    if not code.strip():
        return LINK_USAGE
    try:
        identity = approval_services.chat_identity_prove(provider=surface, external_id=external_id, code=code)
    except ServiceError as exc:
        return str(exc)
    return f"Linked: your presses here are now recorded as {identity.user.get_username()} in Gatehouse."


STOP_USAGE = "Send /pause [AGENT] [ask] to stop an agent (or your whole team), /resume [AGENT] to let it run again."


def stop_command(text: str) -> tuple[str, list[str]] | None:
    """(`pause` | `resume`, the words after it) of a `/pause` or `/resume` command, else None."""
    command, _, rest = text.strip().partition(" ")
    name = command.split("@", 1)[0].lower()
    if name not in ("/pause", "/resume"):
        return None
    return name[1:], rest.split()[:3]


def apply_stop_command(surface: str, external_id: str, verb: str, words: list[str]) -> str:
    """The stop switch from chat, for a team admin whose chat account is proven; the reply."""
    user = selectors.user_for_chat(surface, external_id)
    if user is None:
        return "Link this chat account first: send /link with the code from your Gatehouse profile page."
    teams = list(approval_selectors.teams_administered(user))
    if not teams:
        return "Only a team admin can pause or resume agents."
    names = [word for word in words if word.lower() not in ("ask", "deny")]
    if len(names) > 1:
        return STOP_USAGE
    if names:
        agents = [a for t in teams if (a := approval_selectors.agent_in_team(team_id=t.pk, name=names[0]))]
        if len(agents) != 1:
            return f"No single agent named {names[0]!r} in the teams you administer."
        team, agent = agents[0].team, agents[0]
    elif len(teams) == 1:
        team, agent = teams[0], None
    else:
        return "You administer several teams: name the agent, or use the dashboard for a whole team."
    subject = f"agent {agent.name}" if agent else f"team {team.name}"
    if verb == "pause":
        answer = "ask" if "ask" in (w.lower() for w in words) else "deny"
        approval_services.pause_set(team=team, agent=agent, answer=answer, user=user, surface=surface)
        return f"Paused {subject}: every call is {'asked of a person' if answer == 'ask' else 'denied'} until /resume."
    pause = next(
        (p for p in approval_selectors.pauses_visible_to(user) if p.team_id == team.pk and p.agent == agent), None
    )
    if pause is None:
        return f"{subject.capitalize()} is not paused."
    approval_services.pause_lift(pause=pause, user=user, surface=surface)
    return f"Resumed {subject}: its calls are decided by the rules again."


# --- the send queue -------------------------------------------------------------------------


class RetryLater(Exception):
    """The chat service asked us to slow down (HTTP 429); retry the same call after `after` s."""

    def __init__(self, after: float) -> None:
        super().__init__(f"retry after {after}s")
        self.after = after


class Transient(Exception):
    """A network error or a 5xx: retry with exponential backoff, never drop."""


@dataclass
class Job:
    key: str  # rate-limit key: a chat or channel id; "" for calls outside per-chat limits
    run: Callable[[], object]
    label: str
    attempts: int = 0


@dataclass
class SendQueue:
    """One background thread that makes a bridge's HTTP calls, in order per chat.

    - Announcers are called inside `on_commit` of whatever thread committed; `put` never
      blocks them.
    - Honours a minimum interval per chat and a global rate, so a burst is spread out
      instead of being answered with 429s; a 429's `retry_after` pauses that chat and
      the job is retried first. Network errors back off exponentially. Nothing is dropped
      except on a permanent error (bad request, revoked token), which is logged.
    """

    name: str
    per_key_interval: float = 1.0
    global_rate: float = 30.0
    max_backoff: float = 60.0
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _queues: dict[str, deque[Job]] = field(default_factory=dict)
    _next_at: dict[str, float] = field(default_factory=dict)
    _recent: deque[float] = field(default_factory=deque)
    _running: int = 0
    _thread: threading.Thread | None = None
    _stopping: bool = False

    def put(self, job: Job, *, front: bool = False) -> None:
        with self._cond:
            queue = self._queues.setdefault(job.key, deque())
            queue.appendleft(job) if front else queue.append(job)
            if self._thread is None or not self._thread.is_alive():
                self._stopping = False
                self._thread = threading.Thread(target=self._loop, name=f"{self.name}-sender", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def pending(self) -> int:
        with self._cond:
            return sum(len(q) for q in self._queues.values()) + self._running

    def wait_idle(self, timeout: float) -> bool:
        """Block until every queued call was made (or dropped); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while any(self._queues.values()) or self._running:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _pick(self, now: float) -> tuple[Job | None, float]:
        """The next job allowed to run now, or how long to wait for one."""
        while self._recent and now - self._recent[0] >= 1.0:
            self._recent.popleft()
        ready = [(self._next_at.get(key, 0.0), key) for key, queue in self._queues.items() if queue]
        if not ready:
            return None, 3600.0
        at, key = min(ready)
        if key and len(self._recent) >= self.global_rate:
            at = max(at, self._recent[0] + 1.0)
        if at > now:
            return None, at - now
        job = self._queues[key].popleft()
        if key:
            self._next_at[key] = now + self.per_key_interval
            self._recent.append(now)
        return job, 0.0

    def _loop(self) -> None:
        while True:
            with self._cond:
                job, wait = self._pick(time.monotonic())
                while job is None:
                    if self._stopping:
                        return
                    self._cond.wait(wait)
                    job, wait = self._pick(time.monotonic())
                self._running += 1
            try:
                self._run(job)
            finally:
                with self._cond:
                    self._running -= 1
                    self._cond.notify_all()

    def _run(self, job: Job) -> None:
        try:
            job.run()
            if job.key:
                # Measured from the end of the call, so slow work before the next call
                # (or network jitter) can never squeeze two messages closer than allowed.
                with self._cond:
                    self._next_at[job.key] = time.monotonic() + self.per_key_interval
        except RetryLater as exc:
            log.info("%s: %s rate-limited, retrying in %.1fs", self.name, job.label, exc.after)
            with self._cond:
                self._next_at[job.key] = time.monotonic() + exc.after
            self.put(job, front=True)
        except Transient as exc:
            job.attempts += 1
            delay = min(self.max_backoff, 0.5 * 2 ** min(job.attempts, 10))
            log.warning("%s: %s failed (%s), retry %d in %.1fs", self.name, job.label, exc, job.attempts, delay)
            with self._cond:
                self._next_at[job.key] = time.monotonic() + delay
            self.put(job, front=True)
        except Exception:  # one broken post must not stop the worker thread for every other ask
            log.exception("%s: %s failed permanently and was dropped", self.name, job.label)
        finally:
            # The sender is a long-lived thread outside any request cycle: give back its
            # connection so it never pins a stale one (or blocks a test database drop).
            # A failure here must not end the thread either: the next job tries again.
            if not connection.in_atomic_block:
                try:
                    close_old_connections()
                    connection.close()
                except Exception:
                    log.exception("%s: giving back the database connection after %s failed", self.name, job.label)


# --- the bridge ---------------------------------------------------------------------------


class ChatBridge:
    """An `Announcer` that posts each ask as a chat message and edits it when it is over.

    Subclasses set `name` (the surface, e.g. "telegram") and implement the transport.
    """

    name: str = "chat"
    # Only asks were posted: a call decided at submit has no card to edit (see `Announcer`).
    asks_only = True

    def __init__(self, *, default_route: selectors.Route | None, queue: SendQueue) -> None:
        self.default_route = default_route  # the environment's: the default team's route
        self.queue = queue

    def route_for(self, team_id: int) -> selectors.Route | None:
        """Where this team's asks go on this service, and who may decide them; None: nowhere."""
        return selectors.chat_route(self.name, team_id, default=self.default_route)

    def approvers_for(self, team_id: int) -> tuple[str, ...]:
        route = self.route_for(team_id)
        return route.approvers if route is not None else ()

    # transport, implemented per service ------------------------------------------------

    def post_card(self, request: PermissionRequest, channel: str) -> tuple[str, str]:
        """Post the ask with its buttons; return (channel, message id) as the service names them."""
        raise NotImplementedError

    def edit_card(self, message: SurfaceMessage, request: PermissionRequest, decision: Decision) -> None:
        """Replace the buttons with the outcome."""
        raise NotImplementedError

    def refresh_card(self, message: SurfaceMessage, request: PermissionRequest) -> None:
        """Re-render a pending card in place, buttons kept (a vote, a ladder step)."""
        raise NotImplementedError

    def post_nudge(self, message: SurfaceMessage, text: str) -> None:
        """Post a short message under the card (a reminder, an escalation), which notifies people."""
        raise NotImplementedError

    # Announcer --------------------------------------------------------------------------

    def request_created(self, request: PermissionRequest) -> None:
        # Only to the request's own team's chat: every team's asks go to its chat alone.
        route = self.route_for(request.team_id)
        if route is None:
            return
        self.queue.put(Job(route.channel, partial(self._post, request.pk, route.channel), f"post {request.pk}"))

    def request_finished(self, request: PermissionRequest, decision: Decision) -> None:
        self.queue.put(Job("", lambda: self._finalise(request.pk), f"finalise {request.pk}"))

    def request_updated(self, request: PermissionRequest, row: Decision) -> None:
        """A vote or a ladder step: the card shows it; a ladder step also nudges the chat."""
        nudge = nudge_text(request, row) if row.kind in (AuditKind.REMINDER, AuditKind.ESCALATION) else ""
        self.queue.put(Job("", partial(self._refresh, request.pk, nudge), f"refresh {request.pk}"))

    # jobs (run on the sender thread) ------------------------------------------------------

    def _post(self, request_id: uuid.UUID, channel: str) -> None:
        request = approval_selectors.request_get(request_id)
        if request is None or request.state != RequestState.PENDING:
            return  # decided while queued (a burst): no point in buttons nobody may press
        posted_channel, message_id = self.post_card(request, channel)
        services.surface_message_record(
            request_id=request_id, surface=self.name, channel=posted_channel, message_id=message_id
        )
        # Decided while we posted, on another process that found no message to edit yet:
        # the record above committed before this read, so one of us always edits it.
        if approval_selectors.request_get(request_id).state != RequestState.PENDING:  # type: ignore[union-attr]
            self._finalise(request_id)

    def _finalise(self, request_id: uuid.UUID) -> None:
        for message in selectors.unfinalised_messages(request_id, self.message_surfaces()):
            self.queue.put(Job(message.channel, partial(self._edit, message.pk), f"edit {request_id}"))

    def _edit(self, message_pk: int) -> None:
        message = selectors.surface_message(message_pk)
        if message is None or message.finalised_at is not None:
            return
        request = approval_selectors.request_get(message.request_id)
        decision = approval_selectors.decision_for(request) if request is not None else None
        if request is None or decision is None:
            return
        self.edit_card(message, request, decision)
        services.surface_message_finalise(message_pk)

    def _refresh(self, request_id: uuid.UUID, nudge: str) -> None:
        for message in selectors.unfinalised_messages(request_id, [self.name]):
            self.queue.put(Job(message.channel, partial(self._refresh_one, message.pk, nudge), f"refresh {request_id}"))

    def _refresh_one(self, message_pk: int, nudge: str) -> None:
        message = selectors.surface_message(message_pk)
        request = approval_selectors.request_get(message.request_id) if message is not None else None
        if message is None or request is None or request.state != RequestState.PENDING:
            return  # over meanwhile: the outcome's edit replaces the card
        self.refresh_card(message, request)
        if nudge:
            self.post_nudge(message, nudge)

    def message_surfaces(self) -> list[str]:
        """The `SurfaceMessage.surface` values this bridge edits when a request is over."""
        return [self.name]

    def finalise_stragglers(self, limit: int = 100) -> int:
        """Queue edits for messages whose request ended while no process was told (a crash)."""
        ids = selectors.requests_with_stale_messages(self.message_surfaces(), limit)
        for request_id in ids:
            self.queue.put(Job("", partial(self._finalise, request_id), f"finalise {request_id}"))
        return len(ids)
