"""The relay's own state: where each team's asks are announced, where each ask was
announced, which chat updates were applied, and the outbound webhooks."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from approvals.models import PermissionRequest, Team


class ChatRoute(models.Model):
    """A team's own Telegram chat or Slack channel, and who there may decide its asks.

    The environment variables (`TELEGRAM_CHAT_ID` + `TELEGRAM_APPROVERS`, `SLACK_CHANNEL` +
    `SLACK_APPROVERS`) are the route of the `default` team until it has a row here; a team
    with no route gets no chat posts. One chat serves one team, so no team's asks are shown
    where another team's people sit.
    """

    class Surface(models.TextChoices):
        TELEGRAM = "telegram", "Telegram"
        SLACK = "slack", "Slack"

    # Indexed by the unique (team, surface) (migration 0005).
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="chat_routes", db_index=False)
    surface = models.CharField(max_length=16, choices=Surface.choices)
    channel = models.CharField(max_length=200, help_text="Telegram chat id (e.g. -100123) or Slack channel id (C…)")
    approvers = models.JSONField(default=list, blank=True, help_text="Chat user ids who may decide this team's asks")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "surface"], name="chat_route_one_per_team"),
            models.UniqueConstraint(fields=["surface", "channel"], name="chat_route_one_team_per_chat"),
        ]

    def __str__(self) -> str:
        return f"{self.team}: {self.surface} {self.channel}"


class SurfaceMessage(models.Model):
    """A chat message that announced a request, so it can be edited when it is decided."""

    request = models.ForeignKey(PermissionRequest, on_delete=models.CASCADE, related_name="surface_messages")
    surface = models.CharField(max_length=32)
    channel = models.CharField(max_length=200)
    message_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    finalised_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["surface", "channel", "message_id"], name="surface_message_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.surface}:{self.channel}/{self.message_id}"


class ProcessedUpdate(models.Model):
    """An inbound chat update (Telegram update_id, Slack retry) applied exactly once."""

    surface = models.CharField(max_length=32)
    update_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["surface", "update_id"], name="processed_update_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.surface}:{self.update_id}"


class Webhook(models.Model):
    """An outbound PreToolUse or PermissionRequest webhook, HMAC-signed."""

    class Event(models.TextChoices):
        PRE_TOOL_USE = "PreToolUse", "PreToolUse"
        PERMISSION_REQUEST = "PermissionRequest", "PermissionRequest"

    class OnError(models.TextChoices):
        IGNORE = "ignore", "ignore"
        DENY = "deny", "deny"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="webhooks")
    name = models.CharField(max_length=100)
    url = models.URLField(max_length=2000)
    event = models.CharField(max_length=32, choices=Event.choices)
    secret = models.CharField(max_length=200)
    timeout_ms = models.PositiveIntegerField(default=5000)
    on_error = models.CharField(max_length=8, choices=OnError.choices, default=OnError.IGNORE)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.event} → {self.url}"


class PushSubscription(models.Model):
    """A browser's Web Push subscription for one person (the PushSubscription JSON it sent)."""

    user = models.ForeignKey(  # indexed by the unique (user, endpoint) (migration 0005)
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="push_subscriptions", db_index=False
    )
    endpoint = models.URLField(max_length=2000)
    p256dh = models.CharField(max_length=200)
    auth = models.CharField(max_length=100)
    user_agent = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "endpoint"], name="push_subscription_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} → {self.endpoint[:60]}"


class NtfyTopic(models.Model):
    """A person's ntfy topic: an unguessable name on the configured ntfy server."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ntfy_topic")
    topic = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.user_id} → {self.topic}"


class PushActionToken(models.Model):
    """A one-time token behind one notification button: one action on one request, for one person.

    Stored as its SHA-256 digest. It expires with the ask (`expires_at` is the request's
    deadline) and is spent by its first use.
    """

    class Action(models.TextChoices):
        ALLOW = "allow", "allow"
        DENY = "deny", "deny"

    token_hash = models.CharField(max_length=64, unique=True)
    request = models.ForeignKey(PermissionRequest, on_delete=models.CASCADE, related_name="push_tokens")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="push_tokens")
    action = models.CharField(max_length=8, choices=Action.choices)
    channel = models.CharField(max_length=16)  # "webpush" | "ntfy"
    subscription = models.ForeignKey(PushSubscription, null=True, blank=True, on_delete=models.SET_NULL)
    expires_at = models.DateTimeField()
    spent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.action} {self.request_id} for {self.user_id}"
