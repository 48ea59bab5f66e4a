"""Inbound HTTP from chat services: Slack interactions and the optional Telegram webhook.

Both answer fast (Slack wants an acknowledgement within 3 seconds): the press is applied
in one short transaction and every reply to the chat service leaves through the bridge's
send queue, never on this request's path.
"""

from __future__ import annotations

import hmac
import json
import logging

from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from telegram import Update

from relay.bridges import slack, telegram

log = logging.getLogger(__name__)


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@csrf_exempt  # authenticated by Slack's signature instead
@require_POST
def slack_actions(request: HttpRequest) -> HttpResponse:
    bridge = slack.get_bridge()
    if bridge is None:
        return _error(404, "the Slack bridge is off: set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET")
    body = request.body
    headers = request.headers
    if not bridge.verify(body, headers.get("X-Slack-Request-Timestamp"), headers.get("X-Slack-Signature")):
        log.warning("slack interaction refused: bad signature or outside the 5-minute window")
        return _error(401, "invalid Slack signature or stale timestamp")
    try:
        payload = slack.load_payload(request.POST.get("payload", ""))
        applied = bridge.apply_interaction(payload, body)
    except (ValueError, KeyError, TypeError) as exc:
        return _error(400, f"not a Gatehouse button press: {exc}")
    except DatabaseError:
        log.exception("slack interaction not applied")
        return _error(503, "Gatehouse could not record this press; try again")
    if not applied:
        log.info("slack interaction already applied (retry %s)", request.headers.get("X-Slack-Retry-Num", "-"))
    return HttpResponse(status=200)


@csrf_exempt  # authenticated by Slack's signature instead
@require_POST
def slack_commands(request: HttpRequest) -> HttpResponse:
    """Slash commands: `/gatehouse link CODE` proves the sender's Slack account is theirs."""
    bridge = slack.get_bridge()
    if bridge is None:
        return _error(404, "the Slack bridge is off: set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET")
    headers = request.headers
    if not bridge.verify(request.body, headers.get("X-Slack-Request-Timestamp"), headers.get("X-Slack-Signature")):
        log.warning("slack command refused: bad signature or outside the 5-minute window")
        return _error(401, "invalid Slack signature or stale timestamp")
    try:
        text = bridge.apply_command(request.POST)
    except ValueError as exc:
        return _error(400, f"not a Slack slash command: {exc}")
    except DatabaseError:
        log.exception("slack command not applied")
        return _error(503, "Gatehouse could not record this; try again")
    return JsonResponse({"response_type": "ephemeral", "text": text})


@csrf_exempt  # authenticated by the secret_token we gave Telegram in setWebhook
@require_POST
def telegram_webhook(request: HttpRequest) -> HttpResponse:
    bridge = telegram.get_bridge()
    if bridge is None or not bridge.config.webhook_secret:
        return _error(404, "Telegram webhook mode is off (set TELEGRAM_WEBHOOK_SECRET)")
    given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
    if not hmac.compare_digest(given.encode(), bridge.config.webhook_secret.encode()):
        return _error(401, "wrong X-Telegram-Bot-Api-Secret-Token")
    try:
        data = json.loads(request.body)
        if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
            raise ValueError("an Update needs an integer update_id")
        update = Update.de_json(data, None)
    except (ValueError, KeyError, TypeError) as exc:
        return _error(400, f"not a Telegram Update: {exc}")
    try:
        bridge.apply_update(update)
    except (OperationalError, InterfaceError):
        # The database is away: a non-2xx makes Telegram deliver it again later.
        log.exception("telegram update %s not applied", data["update_id"])
        return _error(503, "Gatehouse could not record this update; Telegram will retry")
    except Exception:
        # This update itself cannot be applied; Telegram would redeliver it before every
        # later one, blocking all presses. Acknowledged and dropped, loudly.
        log.exception("telegram update %s dropped: it cannot be applied", data["update_id"])
        telegram.DROPPED_UPDATES.labels(telegram.SURFACE).inc()
    return HttpResponse(status=200)
