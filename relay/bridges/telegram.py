"""The Telegram bridge: each ask is a message with inline buttons, edited when it is over.

python-telegram-bot does the Bot API calls (its `Bot` is asyncio; we drive it from our
own threads, each with a private event loop, so Django's ORM stays in sync code).
Outbound calls go through the bridge's `SendQueue` (1 message/s per chat, 30/s overall,
`retry_after` honoured). Inbound updates arrive by long polling (`run_telegram_bot`) or
by webhook; either way `TelegramBridge.apply_update` applies each `update_id` once.
"""

from __future__ import annotations

import asyncio
import html
import logging
import threading
import warnings
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection, transaction
from prometheus_client import Counter
from telegram import Bot, ForceReply, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError
from telegram.request import HTTPXRequest

from approvals import questions
from approvals import selectors as approval_selectors
from approvals import services as approval_services
from approvals.models import Decision, PermissionRequest, RequestState
from approvals.selectors import grant_rule_for
from relay.bridges import selectors, services
from relay.bridges.base import (
    ACTIONS,
    ANSWER_ACTIONS,
    CARD_LIMITS,
    ChatBridge,
    Job,
    Press,
    RetryLater,
    SendQueue,
    Transient,
    apply_link,
    apply_press,
    apply_stop_command,
    card_excerpt,
    chat_allow_withheld,
    chat_question,
    check_press,
    cut_cue,
    cwd_shown,
    destructive_warning,
    grant_shown,
    outcome_text,
    progress_lines,
    refuse,
    request_url,
    sign_action,
    stop_command,
    verify_action,
)
from relay.bridges.selectors import Route
from relay.masking import mask_secrets
from relay.models import SurfaceMessage

log = logging.getLogger(__name__)

SURFACE = "telegram"
POISON_ATTEMPTS = 3  # tries of an update that raises (not a database outage) before it is dropped
DROPPED_UPDATES = Counter(
    "gatehouse_chat_dropped_updates_total",
    "Inbound chat updates that could not be applied and were dropped.",
    ["surface"],
)
REASON_SURFACE = "telegram.reason"  # the force-reply prompt that collects a deny reason
T = TypeVar("T")


@dataclass(frozen=True)
class TelegramConfig:
    token: str
    chat_id: str
    approvers: list[str]
    api_url: str = "https://api.telegram.org"
    webhook_secret: str = ""
    chat_interval: float = 1.0
    global_rate: float = 30.0

    @classmethod
    def from_settings(cls) -> TelegramConfig | None:
        # TELEGRAM_CHAT_ID is the default team's chat; other teams' chats are chat routes.
        if not settings.TELEGRAM_BOT_TOKEN:
            return None
        return cls(
            token=settings.TELEGRAM_BOT_TOKEN,
            chat_id=settings.TELEGRAM_CHAT_ID,
            approvers=list(settings.TELEGRAM_APPROVERS),
            api_url=settings.TELEGRAM_API_URL.rstrip("/"),
            webhook_secret=settings.TELEGRAM_WEBHOOK_SECRET,
            chat_interval=settings.TELEGRAM_CHAT_INTERVAL_MS / 1000,
            global_rate=float(settings.TELEGRAM_GLOBAL_RATE),
        )


def make_bot(config: TelegramConfig, *, poll_timeout: float = 0) -> Bot:
    request = HTTPXRequest(connection_pool_size=4, read_timeout=15, connect_timeout=10)
    updates_request = HTTPXRequest(read_timeout=poll_timeout + 15, connect_timeout=10)
    return Bot(config.token, base_url=f"{config.api_url}/bot", request=request, get_updates_request=updates_request)


def retry_seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 deprecates the int form; accept either
        warnings.simplefilter("ignore")
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class BotRunner:
    """Runs python-telegram-bot coroutines from sync code on one private event loop."""

    def __init__(self, config: TelegramConfig, *, poll_timeout: float = 0) -> None:
        self.config = config
        self.poll_timeout = poll_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._bot: Bot | None = None

    @property
    def bot(self) -> Bot:
        if self._bot is None:
            self._bot = make_bot(self.config, poll_timeout=self.poll_timeout)
        return self._bot

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Make one Bot API call, translating its errors for the send queue."""
        try:
            return self.run(coro)
        except RetryAfter as exc:
            raise RetryLater(retry_seconds(exc)) from exc
        except BadRequest:
            raise  # our request was wrong: retrying cannot help
        except NetworkError as exc:  # includes TimedOut and 5xx
            raise Transient(str(exc)) from exc

    def close(self) -> None:
        if self._loop is not None:
            if self._bot is not None:
                try:
                    self._loop.run_until_complete(self._bot.shutdown())
                except TelegramError:
                    pass
            self._loop.close()
            self._loop = None
            self._bot = None


# --- the card ---------------------------------------------------------------------------


def card_html(request: PermissionRequest) -> str:
    """The message body: tool, agent, a readable excerpt, the destructive warning, a link."""
    esc = html.escape
    lines = [f"🔐 <b>{esc(request.tool_name)}</b> · agent <b>{esc(request.agent.name)}</b>"]
    if request.cwd:
        lines.append(f"in <code>{esc(cwd_shown(request))}</code>")
    excerpt = card_excerpt(request.tool_name, request.tool_input, CARD_LIMITS[SURFACE])
    language = f' class="language-{excerpt.language}"' if excerpt.language else ""
    if excerpt.kind == "text":
        lines.append(esc(excerpt.body))
    else:
        lines.append(f"<pre><code{language}>{esc(excerpt.body)}</code></pre>")
    warning = destructive_warning(request)
    if warning:
        lines.append(f"⚠️ <b>Destructive:</b> {esc(warning)}")
    if excerpt.hidden:
        lines.append(f"⚠️ {excerpt.hidden} hidden character(s) shown as ⟨NAME⟩")
    if excerpt.truncated:
        lines.append(f"<b>{esc(cut_cue(excerpt))}</b>")
    withheld = chat_allow_withheld(request, SURFACE)
    grant = grant_shown(request)
    if grant and not withheld:
        lines.append(f"“Allow for session” / “Always allow” save <code>{esc(grant)}</code>")
    if withheld:
        lines.append(f"No Allow here ({esc(withheld)}): Deny, or decide in Gatehouse.")
    lines += [f"👥 {esc(line)}" for line in progress_lines(request)]
    link = request_url(request.pk)
    lines.append(f'<a href="{esc(link, quote=True)}">Open in Gatehouse</a>')
    return "\n".join(lines)


def keyboard(request: PermissionRequest) -> InlineKeyboardMarkup:
    def button(action: str) -> InlineKeyboardButton:
        return InlineKeyboardButton(ACTIONS[action][2], callback_data=sign_action(SURFACE, action, request.pk))

    if questions.questions_of(request.tool_name, request.tool_input):
        # An AskUserQuestion call: one button per option, or answered in Gatehouse.
        question = chat_question(request)
        options = [
            [
                InlineKeyboardButton(
                    mask_secrets(label).text, callback_data=sign_action(SURFACE, ANSWER_ACTIONS[i], request.pk)
                )
            ]
            for i, label in enumerate(question.labels if question is not None else ())
        ]
        return InlineKeyboardMarkup([*options, [button("d")]])
    if chat_allow_withheld(request, SURFACE):
        return InlineKeyboardMarkup([[button("d")]])  # the card does not show the whole call
    if grant_rule_for(request) is None:
        return InlineKeyboardMarkup([[button("o"), button("d")]])  # no rule says exactly this call
    return InlineKeyboardMarkup([[button("o"), button("s")], [button("a"), button("d")]])


def display_name(user: Any) -> str:
    if user is None:
        return ""
    return f"@{user.username}" if user.username else str(user.full_name or user.id)


def link_code(text: str) -> str | None:
    """The code of a `/link CODE` (or `/link@bot CODE`) command; "" with no code; None if not one."""
    command, _, rest = text.strip().partition(" ")
    if command.split("@", 1)[0].lower() != "/link":
        return None
    return rest.strip()[:64]


# --- the bridge -------------------------------------------------------------------------


class TelegramBridge(ChatBridge):
    name = SURFACE

    def __init__(self, config: TelegramConfig) -> None:
        queue = SendQueue("telegram", per_key_interval=config.chat_interval, global_rate=config.global_rate)
        default = Route(config.chat_id, tuple(config.approvers)) if config.chat_id else None
        super().__init__(default_route=default, queue=queue)
        self.config = config
        # Only the sender thread touches this runner, so its event loop is never shared.
        self.sender = BotRunner(config)

    def message_surfaces(self) -> list[str]:
        return [SURFACE, REASON_SURFACE]

    # transport (sender thread) -----------------------------------------------------------

    def post_card(self, request: PermissionRequest, channel: str) -> tuple[str, str]:
        message = self.sender.call(
            self.sender.bot.send_message(
                chat_id=channel,
                text=card_html(request),
                parse_mode=ParseMode.HTML,
                reply_markup=keyboard(request),
                disable_web_page_preview=True,
            )
        )
        return str(message.chat_id), str(message.message_id)

    def edit_card(self, message: SurfaceMessage, request: PermissionRequest, decision: Decision) -> None:
        outcome = html.escape(outcome_text(request, decision))
        text = f"<b>{outcome}</b>" if message.surface == REASON_SURFACE else f"{card_html(request)}\n\n<b>{outcome}</b>"
        try:
            # No reply_markup: Telegram removes the buttons with the edit.
            self.sender.call(
                self.sender.bot.edit_message_text(
                    chat_id=message.channel,
                    message_id=int(message.message_id),
                    text=text,
                    parse_mode=ParseMode.HTML,
                    disable_web_page_preview=True,
                )
            )
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():  # another process already edited it
                raise

    def refresh_card(self, message: SurfaceMessage, request: PermissionRequest) -> None:
        try:
            self.sender.call(
                self.sender.bot.edit_message_text(
                    chat_id=message.channel,
                    message_id=int(message.message_id),
                    text=card_html(request),
                    parse_mode=ParseMode.HTML,
                    reply_markup=keyboard(request),
                    disable_web_page_preview=True,
                )
            )
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():  # another process already showed it
                raise

    def post_nudge(self, message: SurfaceMessage, text: str) -> None:
        self.sender.call(
            self.sender.bot.send_message(
                chat_id=message.channel, text=text, reply_to_message_id=int(message.message_id)
            )
        )

    def _toast(self, callback_id: str, text: str) -> Job:
        def run() -> None:
            try:
                self.sender.call(self.sender.bot.answer_callback_query(callback_id, text=text[:200]))
            except BadRequest as exc:  # the query is too old to answer: the press was still applied
                log.info("telegram toast not shown: %s", exc)

        return Job("", run, f"toast {callback_id}")

    def _reason_prompt(self, request_id: str, chat_id: str, who: str) -> Job:
        def run() -> None:
            request = approval_selectors.request_get(request_id)
            if request is None or request.state != RequestState.PENDING:
                return
            text = (
                f"{html.escape(who)}: deny <b>{html.escape(request.tool_name)}</b> for "
                f"{html.escape(request.agent.name)}? Reply to this message with a reason the agent will see, "
                "or reply <code>-</code> to deny without one."
            )
            message = self.sender.call(
                self.sender.bot.send_message(
                    chat_id=chat_id,
                    text=text,
                    parse_mode=ParseMode.HTML,
                    reply_markup=ForceReply(selective=True, input_field_placeholder="Reason for denying"),
                )
            )
            services.surface_message_record(
                request_id=request_id,
                surface=REASON_SURFACE,
                channel=str(message.chat_id),
                message_id=str(message.message_id),
            )

        return Job(chat_id, run, f"deny prompt {request_id}")

    def _reply(self, chat_id: str, reply_to: int, text: str) -> Job:
        return Job(
            chat_id,
            lambda: self.sender.call(
                self.sender.bot.send_message(chat_id=chat_id, text=text, reply_to_message_id=reply_to)
            ),
            f"reply {chat_id}",
        )

    # inbound ---------------------------------------------------------------------------

    def apply_update(self, update: Update) -> bool:
        """Apply one update exactly once; False if this `update_id` was applied before.

        - Raises on a database error, with nothing recorded, so the caller retries it.
        """
        with transaction.atomic():
            if not services.processed_update_claim(surface=SURFACE, update_id=str(update.update_id)):
                return False
            replies = self._apply(update)
        for job in replies:  # toasts and prompts leave only after the decision committed
            self.queue.put(job)
        return True

    def _apply(self, update: Update) -> list[Job]:
        if update.callback_query is not None:
            return self._apply_press(update)
        message = update.message
        if message is not None and message.from_user is None:
            return []  # a channel post or an anonymous admin: no person to check or answer
        if message is not None and message.text is not None and link_code(message.text) is not None:
            return self._apply_link(update)
        if message is not None and message.text is not None and (stop := stop_command(message.text)) is not None:
            assert message.from_user is not None
            text = apply_stop_command(SURFACE, str(message.from_user.id), *stop)
            return [self._reply(str(message.chat.id), message.message_id, text)]
        if message is not None and message.reply_to_message is not None and message.text is not None:
            return self._apply_reason(update)
        return []  # other chatter in the chat is none of our business

    def _apply_link(self, update: Update) -> list[Job]:
        """`/link CODE` in a private chat proves this Telegram account is the code's person."""
        message = update.message
        assert message is not None and message.text is not None
        chat_id = str(message.chat.id)
        if message.chat.type != "private" or message.from_user is None:
            # In a group others read the code and could send it first from their own account,
            # linking theirs to the code's person: the code is burnt, and a new one is needed.
            approval_services.chat_link_code_burn(code=link_code(message.text) or "")
            text = (
                "Send /link with your code to me in a private chat, not here. That code was seen "
                "and no longer works: get a new one on your profile page."
            )
        else:
            text = apply_link(SURFACE, str(message.from_user.id), link_code(message.text) or "")
        return [self._reply(chat_id, message.message_id, text)]

    def _apply_press(self, update: Update) -> list[Job]:
        query = update.callback_query
        assert query is not None
        who = display_name(query.from_user)
        parsed = verify_action(SURFACE, query.data or "")
        if parsed is None:
            press = Press(SURFACE, str(query.from_user.id), who, "", "?")
            return [self._toast(query.id, refuse(press, "forged or foreign callback data").text)]
        action, request_id = parsed
        press = Press(SURFACE, str(query.from_user.id), who, request_id, action)
        if action != "d":
            return [self._toast(query.id, apply_press(press, self.approvers_for).text)]
        # Deny first asks for an optional reason, by reply.
        stop, _request, _user = check_press(press, self.approvers_for)
        if stop is not None:
            return [self._toast(query.id, stop.text)]
        chat_id = str(query.message.chat.id) if query.message is not None else self.config.chat_id
        return [
            self._toast(query.id, "Reply to my message with a reason (or '-') to deny."),
            self._reason_prompt(request_id, chat_id, who),
        ]

    def _apply_reason(self, update: Update) -> list[Job]:
        message = update.message
        assert message is not None and message.reply_to_message is not None and message.from_user is not None
        chat_id = str(message.chat.id)
        prompt = selectors.surface_message_by_id(REASON_SURFACE, chat_id, str(message.reply_to_message.message_id))
        if prompt is None:
            return []
        text = (message.text or "").strip()
        reason = "" if text in ("", "-") else text[:1000]
        who = display_name(message.from_user)
        press = Press(SURFACE, str(message.from_user.id), who, str(prompt.request_id), "d", reason)
        outcome = apply_press(press, self.approvers_for)
        return [] if outcome.applied else [self._reply(chat_id, message.message_id, outcome.text)]


# --- long polling ------------------------------------------------------------------------


class TelegramPoller:
    """`getUpdates` in a loop: applies every update once, survives network errors.

    An update is confirmed to Telegram (by asking for `offset = update_id + 1`) only after
    it was applied and committed. A crash in between makes Telegram deliver it again, and
    `ProcessedUpdate` turns that redelivery into a no-op. We never start from a stored
    offset: Telegram re-numbers updates after a quiet week, and a stale offset would
    silently confirm updates we never saw.
    """

    def __init__(self, bridge: TelegramBridge, *, poll_timeout: int = 25, max_backoff: float = 60.0) -> None:
        self.bridge = bridge
        self.poll_timeout = poll_timeout
        self.max_backoff = max_backoff
        self.runner = BotRunner(bridge.config, poll_timeout=poll_timeout)
        self.offset: int | None = None
        self.applied = 0
        self.failures: dict[int, int] = {}  # update_id -> failed tries of an update that raises

    def run(self, stop: threading.Event) -> None:
        backoff = 1.0
        polls = 0
        while not stop.is_set():
            try:
                updates = self.runner.run(
                    self.runner.bot.get_updates(
                        offset=self.offset, timeout=self.poll_timeout, allowed_updates=["callback_query", "message"]
                    )
                )
            except RetryAfter as exc:
                stop.wait(retry_seconds(exc))
                continue
            except Exception as exc:  # network, 5xx, or a reply we cannot parse: never die
                log.warning("telegram getUpdates failed (%s); retrying in %.0fs", exc, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff)
                continue
            backoff = 1.0
            if not self._apply_all(updates, stop):
                stop.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff)
            polls += 1
            if polls % 20 == 1:
                self.bridge.finalise_stragglers()
            if polls % 5000 == 1:  # Telegram redelivers for 24 hours; keep two days of ids
                services.processed_updates_prune(surface=SURFACE)
            close_old_connections()
        self.runner.close()
        connection.close()

    def _apply_all(self, updates: tuple[Update, ...], stop: threading.Event) -> bool:
        for update in updates:
            try:
                if self.bridge.apply_update(update):
                    self.applied += 1
            except (OperationalError, InterfaceError):
                # The database is away: not confirmed, so Telegram hands it to us again on
                # the next poll, however often; nothing after it is lost either.
                log.exception("telegram update %s not applied (database); will retry", update.update_id)
                return False
            except Exception:
                # This update itself cannot be applied. Telegram delivers in order, so
                # retrying it for ever would block every later press: after a few tries
                # it is confirmed and dropped, loudly.
                failures = self.failures.get(update.update_id, 0) + 1
                self.failures[update.update_id] = failures
                if failures < POISON_ATTEMPTS:
                    log.exception("telegram update %s not applied (try %d); will retry", update.update_id, failures)
                    return False
                log.exception("telegram update %s dropped after %d tries", update.update_id, failures)
                DROPPED_UPDATES.labels(SURFACE).inc()
            self.failures.pop(update.update_id, None)
            self.offset = update.update_id + 1
        return True


_bridge: TelegramBridge | None = None
_bridge_lock = threading.Lock()


def get_bridge() -> TelegramBridge | None:
    """The process's Telegram bridge, or None when TELEGRAM_BOT_TOKEN is unset."""
    global _bridge
    with _bridge_lock:
        if _bridge is None:
            config = TelegramConfig.from_settings()
            if config is not None:
                _bridge = TelegramBridge(config)
        return _bridge
