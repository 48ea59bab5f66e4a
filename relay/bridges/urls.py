"""Routes of the chat integrations, included from `relay/urls.py`."""

from django.urls import path

from relay.bridges import views

urlpatterns = [
    path("integrations/slack/actions", views.slack_actions, name="slack-actions"),
    path("integrations/slack/commands", views.slack_commands, name="slack-commands"),
    path("integrations/telegram/webhook", views.telegram_webhook, name="telegram-webhook"),
]
