"""The Django admin: people, teams and memberships are managed here; the audit log is read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest

import policy
from approvals import services
from approvals.models import (
    Agent,
    ChatIdentity,
    Decision,
    Membership,
    PermissionRequest,
    PersonalToken,
    Rule,
    SessionDenials,
    Team,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Visible to staff, never written from the admin: these rows change only through services."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "team__name"]


class PersonAdmin(UserAdmin):
    """Django's user admin plus the person's team roles on the same page."""

    inlines = [*UserAdmin.inlines, MembershipInline]

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # Unticking "active" must also close the sockets the person still has open.
        if change and "is_active" in form.changed_data and not obj.is_active:
            services.person_deactivate(user=obj)


admin.site.unregister(User)
admin.site.register(User, PersonAdmin)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "owner", "default_mode", "token_prefix", "last_seen_at", "revoked_at"]
    list_filter = ["team", "default_mode"]
    search_fields = ["name"]
    readonly_fields = ["token_hash", "token_prefix", "created_at", "last_seen_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A token is shown once, when it is made: `manage.py createagent` or the agents page.
        return False

    @admin.action(description="Revoke the selected agents' tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        for agent in queryset:
            services.agent_revoke(agent=agent)
        self.message_user(request, f"Revoked {queryset.count()} agent token(s).", messages.SUCCESS)


@admin.register(PersonalToken)
class PersonalTokenAdmin(ReadOnlyAdmin):
    list_display = ["user", "token_prefix", "created_at", "last_used_at", "revoked_at"]
    search_fields = ["user__username"]


@admin.register(PermissionRequest)
class PermissionRequestAdmin(ReadOnlyAdmin):
    list_display = ["tool_name", "agent", "team", "state", "session_id", "created_at"]
    list_filter = ["state", "team", "tool_name"]
    search_fields = ["tool_use_id", "session_id", "tool_name"]
    date_hierarchy = "created_at"


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    """The audit log: append-only, so not even a superuser edits or deletes it here."""

    list_display = ["id", "created_at", "agent", "tool_name", "behavior", "reason_type", "decided_by", "surface"]
    list_filter = ["behavior", "reason_type", "surface", "team"]
    search_fields = ["tool_name", "decided_by", "session_id", "rule"]
    date_hierarchy = "created_at"


class RuleForm(forms.ModelForm):
    class Meta:
        model = Rule
        fields = [
            "rule",
            "behavior",
            "source",
            "team",
            "scope",
            "agent",
            "project_path",
            "session_id",
            "expires_at",
            "ask_timeout",
            "created_by",
            "note",
        ]

    def clean_rule(self) -> str:
        text = self.cleaned_data["rule"]
        try:
            return str(policy.parse_rule(text))
        except policy.RuleSyntaxError as exc:
            raise forms.ValidationError(f"invalid rule: {exc}") from None


@admin.register(Rule)
class RuleAdmin(admin.ModelAdmin):
    form = RuleForm
    list_display = ["rule", "behavior", "source", "team", "scope", "expires_at", "created_by"]
    list_filter = ["behavior", "source", "scope", "team"]
    search_fields = ["rule", "note"]


@admin.register(ChatIdentity)
class ChatIdentityAdmin(admin.ModelAdmin):
    list_display = ["provider", "external_id", "user", "proven_at"]
    list_filter = ["provider"]
    # Proven only by the account itself sending a link code to the bot, never by a form.
    readonly_fields = ["proven_at"]
    search_fields = ["external_id", "user__username"]


@admin.register(SessionDenials)
class SessionDenialsAdmin(ReadOnlyAdmin):
    list_display = ["agent", "session_id", "updated_at"]
