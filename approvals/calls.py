"""One proposed tool call, validated the same way whichever door it came in by.

The REST submit, the agent WebSocket's `permission_request` and the Claude Code hook
endpoint all hand `services.request_submit` a call checked by `ToolCallSerializer`,
so a limit or a check added here holds on every entry point at once.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from approvals.api.common import FieldsBoundOnce, StrictSerializer, without_nul
from approvals.models import Context, Mode
from policy.facts import FactsError, facts_to_dict, parse_facts

MAX_HOOK_OUTPUTS = 20
# What a call may say of its place in the agent's session (Claude Code's hook input names
# the first four), and how long each may be. `prompt`: the user's last prompt, sent only by
# an agent whose hook was installed with `--send-prompt`.
CALL_CONTEXT = {"prompt_id": 200, "agent_id": 200, "agent_type": 200, "effort": 32, "prompt": 4000}


# The longest `tool_use_id` and `session_id` a call may have.
CALL_ID_MAX_CHARS = 200


class CallInvalid(ValueError):
    """The call cannot be submitted; the message names each field and what is wrong."""


class ToolCallSerializer(FieldsBoundOnce, StrictSerializer):
    tool_name = serializers.CharField(max_length=200)
    tool_input = serializers.JSONField(required=False, default=dict)
    tool_use_id = serializers.CharField(max_length=CALL_ID_MAX_CHARS, required=False, allow_blank=True)
    session_id = serializers.CharField(max_length=CALL_ID_MAX_CHARS, required=False, allow_blank=True, default="")
    cwd = serializers.CharField(max_length=4096, required=False, allow_blank=True, default="")
    permission_mode = serializers.ChoiceField(choices=Mode.choices, required=False)
    context = serializers.ChoiceField(choices=Context.choices, required=False)  # type: ignore[assignment]
    transcript_path = serializers.CharField(max_length=4096, required=False, allow_blank=True, default="")
    additional_directories = serializers.ListField(
        child=serializers.CharField(max_length=4096), required=False, max_length=100
    )
    permission_suggestions = serializers.ListField(child=serializers.JSONField(), required=False, max_length=100)
    pre_tool_use_hooks = serializers.ListField(
        child=serializers.DictField(), required=False, max_length=MAX_HOOK_OUTPUTS
    )
    home = serializers.CharField(max_length=4096, required=False)
    facts = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="The agent machine's home, user and paths (docs/API.md, Agent facts).",
    )

    call_context = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="Where the call stands in the agent's session: prompt_id, agent_id, agent_type, effort, prompt.",
    )

    class Meta:
        ref_name = "PermissionRequestSubmit"

    def validate_call_context(self, value: Any) -> dict[str, str] | None:
        try:
            return parse_call_context(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_facts(self, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        try:
            return facts_to_dict(parse_facts(value))
        except FactsError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_tool_input(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise serializers.ValidationError("tool_input must be a JSON object")
        without_nul(value)
        return value

    def validate_permission_suggestions(self, value: list[Any]) -> list[Any]:
        without_nul(value, "permission_suggestions")
        return value

    def validate_pre_tool_use_hooks(self, value: list[Any]) -> list[Any]:
        without_nul(value, "pre_tool_use_hooks")
        return value


def parse_call_context(value: Any) -> dict[str, str] | None:
    """The call's context with only the known keys, each a string within its limit; None if empty.

    - An unknown key or a value that is not a string is refused; a longer `prompt` is cut
      (it is shown, never decided on), any other value over its limit is refused.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("call_context must be a JSON object")
    unknown = sorted(set(value) - set(CALL_CONTEXT))
    if unknown:
        raise ValueError(f"call_context has unknown keys: {', '.join(unknown)} (known: {', '.join(CALL_CONTEXT)})")
    context: dict[str, str] = {}
    for key, limit in CALL_CONTEXT.items():
        item = value.get(key)
        if item in (None, ""):
            continue
        if not isinstance(item, str) or "\x00" in item:
            raise ValueError(f"call_context.{key} must be a string without NUL characters")
        if len(item) > limit and key != "prompt":
            raise ValueError(f"call_context.{key} is longer than {limit} characters")
        context[key] = item[:limit]
    return context or None


def parse_call(data: Any) -> dict[str, Any]:
    """Validate a call for `services.request_submit`, or raise CallInvalid saying what to fix."""
    if not isinstance(data, dict):
        raise CallInvalid('the call must be a JSON object with "tool_name"')
    serializer = ToolCallSerializer(data=data)
    if not serializer.is_valid():
        raise CallInvalid(error_sentence(serializer.errors))
    return dict(serializer.validated_data)


def error_sentence(errors: Any, where: str = "") -> str:
    """DRF's nested error dict as one line a person or a model can act on."""
    if isinstance(errors, dict):
        return "; ".join(
            error_sentence(value, f"{where}.{key}" if where else str(key)) for key, value in errors.items()
        )
    if isinstance(errors, list):
        return "; ".join(error_sentence(value, where) for value in errors)
    return f"{where}: {errors}" if where else str(errors)
