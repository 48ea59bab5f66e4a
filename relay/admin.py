"""Admin pages of the relay's settings: each team's chat routes."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from relay.bridges import services
from relay.models import ChatRoute


class ChatRouteForm(forms.ModelForm):
    class Meta:
        model = ChatRoute
        fields = ["team", "surface", "channel", "approvers"]

    def clean_approvers(self) -> list[str]:
        value = self.cleaned_data.get("approvers")
        if not isinstance(value, list) or not all(isinstance(a, str | int) for a in value):
            raise forms.ValidationError('A JSON list of chat user ids, e.g. ["111", "U0ALICE"].')
        return [str(a) for a in value]


@admin.register(ChatRoute)
class ChatRouteAdmin(admin.ModelAdmin):
    form = ChatRouteForm
    list_display = ["team", "surface", "channel", "approvers", "updated_at"]
    list_filter = ["surface", "team"]
    search_fields = ["channel", "team__name"]

    def save_model(self, request: Any, obj: ChatRoute, form: Any, change: bool) -> None:
        # The one write path; the form's model validation already refused a chat another team has.
        route = services.chat_route_set(
            team=obj.team, surface=obj.surface, channel=obj.channel, approvers=obj.approvers
        )
        obj.pk = route.pk
