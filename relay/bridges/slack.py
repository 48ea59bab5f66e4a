"""The Slack bridge: each ask is a Block Kit message with buttons, updated when it is over.

slack-sdk's `WebClient` makes the Web API calls (from the bridge's `SendQueue` thread) and
its `SignatureVerifier` checks interaction requests: HMAC-SHA256 over `v0:{ts}:{body}`
with the signing secret, compared in constant time, refused outside a 5-minute window.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.error import URLError

from django.conf import settings
from django.db import transaction
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier

from approvals import questions
from approvals.models import Decision, PermissionRequest
from relay.bridges import services
from relay.bridges.base import (
    ANSWER_ACTIONS,
    CARD_LIMITS,
    LINK_USAGE,
    ChatBridge,
    Job,
    Press,
    PressOutcome,
    RetryLater,
    SendQueue,
    Transient,
    action_label,
    apply_link,
    apply_press,
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
    verify_action,
)
from relay.bridges.selectors import Route
from relay.masking import mask_secrets
from relay.models import SurfaceMessage

log = logging.getLogger(__name__)

SURFACE = "slack"
ACTION_PREFIX = "gatehouse_"
DENY_VIEW = "gatehouse_deny"  # callback_id of the modal that asks for a deny reason
REASON_CHARS = 1000


@dataclass(frozen=True)
class SlackConfig:
    token: str
    signing_secret: str
    channel: str
    approvers: list[str]
    api_url: str = "https://slack.com/api"
    channel_interval: float = 1.0

    @classmethod
    def from_settings(cls) -> SlackConfig | None:
        # SLACK_CHANNEL is the default team's channel; other teams' channels are chat routes.
        if not settings.SLACK_BOT_TOKEN or not settings.SLACK_SIGNING_SECRET:
            return None
        return cls(
            token=settings.SLACK_BOT_TOKEN,
            signing_secret=settings.SLACK_SIGNING_SECRET,
            channel=settings.SLACK_CHANNEL,
            approvers=list(settings.SLACK_APPROVERS),
            api_url=settings.SLACK_API_URL.rstrip("/"),
            channel_interval=settings.SLACK_CHANNEL_INTERVAL_MS / 1000,
        )


def mrkdwn_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def card_blocks(request: PermissionRequest, *, outcome: str = "") -> list[dict[str, Any]]:
    """Block Kit for one ask: header line, excerpt, warning, link, then buttons or the outcome."""
    excerpt = card_excerpt(request.tool_name, request.tool_input, CARD_LIMITS[SURFACE])
    withheld = chat_allow_withheld(request, SURFACE)
    # A literal ``` inside the input would close the code block early.
    body = mrkdwn_escape(excerpt.body).replace("```", "`\u200b``")
    body = body if excerpt.kind == "text" else f"```{body}```"
    where = f" in `{mrkdwn_escape(cwd_shown(request))}`" if request.cwd else ""
    blocks: list[dict[str, Any]] = [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": (
                    f":lock: *{mrkdwn_escape(request.tool_name)}* · agent *{mrkdwn_escape(request.agent.name)}*{where}"
                ),
            },
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": body}},
    ]
    warning = destructive_warning(request)
    if warning:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f":warning: *Destructive:* {mrkdwn_escape(warning)}"}],
            }
        )
    notes = []
    if excerpt.hidden:
        notes.append(f":warning: {excerpt.hidden} hidden character(s) shown as ⟨NAME⟩")
    if excerpt.truncated:
        notes.append(f"*{mrkdwn_escape(cut_cue(excerpt))}*")
    if withheld and not outcome:
        notes.append(f"No Allow here ({mrkdwn_escape(withheld)}): Deny, or decide in Gatehouse.")
    if notes:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": "\n".join(notes)}]})
    grant = grant_shown(request)
    if grant and not outcome and not withheld:
        # Verbatim: inline code unless a backtick in the rule would close it early.
        shown = mrkdwn_escape(grant) if "`" in grant else f"`{mrkdwn_escape(grant)}`"
        saves = f"“Allow for session” / “Always allow” save {shown}"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": saves}]})
    progress = progress_lines(request)
    if progress and not outcome:
        text = "\n".join(f":busts_in_silhouette: {mrkdwn_escape(line)}" for line in progress)
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": text}]})
    link = f"<{request_url(request.pk)}|Open in Gatehouse>"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": link}]})
    if outcome:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"*{mrkdwn_escape(outcome)}*"}})
        return blocks
    if questions.questions_of(request.tool_name, request.tool_input):
        # An AskUserQuestion call: one button per option, or answered in Gatehouse.
        question = chat_question(request)
        labels = question.labels if question is not None else ()
        elements = [_button(request, ANSWER_ACTIONS[i], "primary" if i == 0 else None) for i in range(len(labels))]
        blocks.append(
            {
                "type": "actions",
                "block_id": f"gatehouse:{request.pk}",
                "elements": [*elements, _button(request, "d", "danger")],
            }
        )
        return blocks
    blocks.append(
        {
            "type": "actions",
            "block_id": f"gatehouse:{request.pk}",
            "elements": [
                # Allow only when the card shows the whole call (`chat_allow_withheld`).
                *([_button(request, "o", "primary")] if not withheld else []),
                # No rule says exactly this call: it can only be allowed once.
                *([_button(request, "s", None), _button(request, "a", None)] if grant and not withheld else []),
                _button(request, "d", "danger"),
            ],
        }
    )
    return blocks


def _button(request: PermissionRequest, action: str, style: str | None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": f"{ACTION_PREFIX}{action}",
        "text": {"type": "plain_text", "text": mask_secrets(action_label(request, action)).text[:75]},
        "value": sign_action(SURFACE, action, request.pk),
    }
    if style:
        button["style"] = style
    return button


def deny_modal(request_id: str, channel: str) -> dict[str, Any]:
    """The modal a Deny press opens: an optional reason the agent will see.

    `private_metadata` carries the Deny button's signed value, so the submission names the
    request only as the signed button did, and the channel to answer in.
    """
    metadata = json.dumps({"value": sign_action(SURFACE, "d", request_id), "channel": channel})
    return {
        "type": "modal",
        "callback_id": DENY_VIEW,
        "private_metadata": metadata,
        "title": {"type": "plain_text", "text": "Deny this request"},
        "submit": {"type": "plain_text", "text": "Deny"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "input",
                "block_id": "reason",
                "optional": True,
                "label": {"type": "plain_text", "text": "Reason the agent will see"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "reason",
                    "multiline": True,
                    "max_length": REASON_CHARS,
                },
            }
        ],
    }


def summary(request: PermissionRequest) -> str:
    """The notification text (and the fallback for clients without blocks)."""
    return f"Gatehouse: {request.agent.name} asks to run {request.tool_name}"


class SlackBridge(ChatBridge):
    name = SURFACE

    def __init__(self, config: SlackConfig) -> None:
        queue = SendQueue("slack", per_key_interval=config.channel_interval, global_rate=30.0)
        default = Route(config.channel, tuple(config.approvers)) if config.channel else None
        super().__init__(default_route=default, queue=queue)
        self.config = config
        self.client = WebClient(token=config.token, base_url=config.api_url + "/", timeout=15)
        self.verifier = SignatureVerifier(config.signing_secret)

    # transport (sender thread) -----------------------------------------------------------

    def _call(self, method: str, **kwargs: Any) -> Any:
        """One Web API call, with errors translated for the send queue."""
        try:
            return self.client.api_call(method, json=kwargs)
        except SlackApiError as exc:
            status = exc.response.status_code
            if status == 429:
                raise RetryLater(float(exc.response.headers.get("Retry-After", "1") or 1)) from exc
            if status >= 500:
                raise Transient(f"{method}: HTTP {status}") from exc
            raise
        except (URLError, OSError) as exc:
            raise Transient(f"{method}: {exc}") from exc

    def post_card(self, request: PermissionRequest, channel: str) -> tuple[str, str]:
        response = self._call("chat.postMessage", channel=channel, text=summary(request), blocks=card_blocks(request))
        return str(response["channel"]), str(response["ts"])

    def edit_card(self, message: SurfaceMessage, request: PermissionRequest, decision: Decision) -> None:
        outcome = outcome_text(request, decision)
        self._call(
            "chat.update",
            channel=message.channel,
            ts=message.message_id,
            text=f"{summary(request)} — {outcome}",
            blocks=card_blocks(request, outcome=outcome),
        )

    def refresh_card(self, message: SurfaceMessage, request: PermissionRequest) -> None:
        self._call(
            "chat.update",
            channel=message.channel,
            ts=message.message_id,
            text=summary(request),
            blocks=card_blocks(request),
        )

    def post_nudge(self, message: SurfaceMessage, text: str) -> None:
        self._call("chat.postMessage", channel=message.channel, thread_ts=message.message_id, text=text)

    def _ephemeral(self, channel: str, user: str, text: str) -> Job:
        call = partial(self._call, "chat.postEphemeral", channel=channel, user=user, text=text)
        return Job(channel, call, "ephemeral")

    # inbound ---------------------------------------------------------------------------

    def verify(self, body: bytes, timestamp: str | None, signature: str | None) -> bool:
        """Signature and 5-minute window of one interaction request (constant-time compare)."""
        try:
            return self.verifier.is_valid(body=body, timestamp=timestamp, signature=signature)
        except ValueError:  # a non-numeric timestamp
            return False

    def apply_interaction(self, payload: dict[str, Any], body: bytes) -> bool:
        """Apply a verified `block_actions` or deny-reason `view_submission` once.

        - False for a retry or duplicate.
        - Raises `ValueError` with an actionable message when the payload is not ours.
        """
        press, channel = parse_interaction(payload)
        # Slack retries (X-Slack-Retry-Num) resend the same payload: its trigger_id (a
        # submitted modal: its view id; failing both, the body's digest) identifies it.
        view_id = (payload.get("view") or {}).get("id") if payload.get("type") == "view_submission" else None
        key = f"view:{view_id}" if view_id else str(payload.get("trigger_id") or hashlib.sha256(body).hexdigest())
        with transaction.atomic():
            if not services.processed_update_claim(surface=SURFACE, update_id=key):
                return False
            outcome = self._apply(press, payload, channel)
        if outcome.text and not outcome.applied and channel:
            self.queue.put(self._ephemeral(channel, press.external_id, outcome.text))
        return True

    def _apply(self, press: Press, payload: dict[str, Any], channel: str) -> PressOutcome:
        if not press.request_id:
            return refuse(press, "forged or foreign button value")
        if press.action != "d" or payload["type"] != "block_actions":
            return apply_press(press, self.approvers_for)
        # Deny first asks for an optional reason, in a modal; its submission decides.
        stop, _request, _user = check_press(press, self.approvers_for)
        if stop is not None:
            return stop
        # Slack honours a trigger_id for 3 s: ahead of every queued post, outside their limits.
        open_modal = partial(
            self._call,
            "views.open",
            trigger_id=str(payload.get("trigger_id", "")),
            view=deny_modal(press.request_id, channel),
        )
        transaction.on_commit(lambda: self.queue.put(Job("", open_modal, f"deny modal {press.request_id}"), front=True))
        return PressOutcome(False, False, "")

    def apply_command(self, form: Mapping[str, str]) -> str:
        """A verified slash command (`/gatehouse link CODE` or `/link CODE`): the ephemeral answer.

        - Slack names the sender (`user_id`) in the signed body, so the code proves that
          account; the answer goes back only to the sender.
        """
        user_id = str(form.get("user_id", "")).strip()
        if not user_id:
            raise ValueError("a slash command needs user_id")
        code = command_link_code(str(form.get("command", "")), str(form.get("text", "")))
        if code is None:
            return f"Unknown command. {LINK_USAGE}"
        return apply_link(SURFACE, user_id, code)


def command_link_code(command: str, text: str) -> str | None:
    """The code of `/link CODE` or `/<any> link CODE`; "" with no code; None for anything else."""
    words = text.split()
    if command.strip().lower().lstrip("/") == "link":
        return " ".join(words)[:64]
    if words and words[0].lower() == "link":
        return " ".join(words[1:])[:64]
    return None


def parse_interaction(payload: dict[str, Any]) -> tuple[Press, str]:
    """A `Press` (request_id empty when the value's signature is wrong) and the channel."""
    kind = payload.get("type")
    if kind == "block_actions":
        return parse_press(payload)
    if kind == "view_submission":
        return parse_deny_reason(payload)
    raise ValueError(f"unsupported interaction type {kind!r}; only block_actions and view_submission")


def parse_press(payload: dict[str, Any]) -> tuple[Press, str]:
    """A button press on a card, and the channel it was pressed in."""
    user = payload.get("user") or {}
    actions = payload.get("actions") or []
    if not isinstance(user, dict) or not user.get("id") or not isinstance(actions, list) or not actions:
        raise ValueError("block_actions payload needs user.id and one action")
    action = actions[0] if isinstance(actions[0], dict) else {}
    if not str(action.get("action_id", "")).startswith(ACTION_PREFIX):
        raise ValueError(f"unknown action_id {action.get('action_id')!r}")
    channel = payload.get("channel") or {}
    channel_id = str(channel.get("id", "")) if isinstance(channel, dict) else ""
    display = str(user.get("username") or user.get("name") or user["id"])
    parsed = verify_action(SURFACE, str(action.get("value", "")))
    if parsed is None:
        return Press(SURFACE, str(user["id"]), display, "", "?"), channel_id
    return Press(SURFACE, str(user["id"]), display, parsed[1], parsed[0]), channel_id


def parse_deny_reason(payload: dict[str, Any]) -> tuple[Press, str]:
    """The Deny press a submitted reason modal completes, with the reason as its message."""
    user, view = payload.get("user") or {}, payload.get("view") or {}
    if not isinstance(user, dict) or not user.get("id") or not isinstance(view, dict):
        raise ValueError("view_submission payload needs user.id and view")
    if view.get("callback_id") != DENY_VIEW:
        raise ValueError(f"unknown view {view.get('callback_id')!r}")
    metadata = json.loads(str(view.get("private_metadata") or "{}"))
    if not isinstance(metadata, dict):
        raise ValueError("the view's private_metadata must be a JSON object")
    reason = _typed_reason(view.get("state"))
    display = str(user.get("username") or user.get("name") or user["id"])
    parsed = verify_action(SURFACE, str(metadata.get("value", "")))
    channel = str(metadata.get("channel", ""))
    if parsed is None or parsed[0] != "d":
        return Press(SURFACE, str(user["id"]), display, "", "?"), channel
    return Press(SURFACE, str(user["id"]), display, parsed[1], "d", reason), channel


def _typed_reason(state: Any) -> str:
    """What was typed into the modal's reason input: `state.values.reason.reason.value`."""
    for key in ("values", "reason", "reason"):
        state = state.get(key) if isinstance(state, dict) else None
    value = state.get("value") if isinstance(state, dict) else None
    return str(value or "").strip()[:REASON_CHARS]


def load_payload(form_value: str) -> dict[str, Any]:
    payload = json.loads(form_value)
    if not isinstance(payload, dict):
        raise ValueError("payload must be a JSON object")
    return payload


_bridge: SlackBridge | None = None
_bridge_lock = threading.Lock()


def get_bridge() -> SlackBridge | None:
    """The process's Slack bridge, or None when SLACK_BOT_TOKEN or SLACK_SIGNING_SECRET is unset."""
    global _bridge
    with _bridge_lock:
        if _bridge is None:
            config = SlackConfig.from_settings()
            if config is not None:
                _bridge = SlackBridge(config)
        return _bridge
