"""Response shapes shared by several endpoints, named once for the OpenAPI schema.

The data itself comes from `selectors.request_payload` / `decision_payload`, the same
dicts the WebSocket sends, so an agent sees one shape over HTTP and WebSocket.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class ReasonSerializer(serializers.Serializer):
    type = serializers.CharField(help_text="rule, hook, classifier, mode, safetyCheck, workingDirectory, user, ...")

    class Meta:
        ref_name = "DecisionReason"


class DecisionOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    behavior = serializers.ChoiceField(choices=["allow", "deny"])
    message = serializers.CharField()
    updated_input = serializers.JSONField(allow_null=True)
    reason = serializers.DictField(
        help_text="`type` plus the fields naming what decided (rule and source, user and surface, ...)"
    )
    decided_by = serializers.CharField()
    surface = serializers.CharField()
    decided_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Decision"


class QuorumOutputSerializer(serializers.Serializer):
    required = serializers.IntegerField(  # type: ignore[assignment]  # a field named like Field.required
        help_text="Approvals from distinct people the call needs."
    )
    approvers = serializers.ListField(child=serializers.CharField(), help_text="Who approved so far, in order.")
    group = serializers.CharField(help_text="Only this team group counts (empty: any approver).")
    steps = serializers.ListField(child=serializers.CharField(), help_text="Escalation ladder steps taken.")
    sentence = serializers.CharField(help_text="'1 of 2 — alice approved' (empty below two approvals).")

    class Meta:
        ref_name = "Quorum"


class RequestOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=["pending", "decided", "cancelled", "expired"])
    agent = serializers.CharField()
    tool_use_id = serializers.CharField()
    tool_name = serializers.CharField()
    tool_input = serializers.JSONField()
    session_id = serializers.CharField()
    cwd = serializers.CharField()
    permission_mode = serializers.CharField()
    context = serializers.CharField()  # type: ignore[assignment]
    created_at = serializers.DateTimeField()
    deadline_at = serializers.DateTimeField(allow_null=True)
    warnings = serializers.ListField(child=serializers.CharField())
    destructive_warning = serializers.CharField(allow_null=True)
    suggested_rules = serializers.ListField(child=serializers.CharField())
    permission_suggestions = serializers.JSONField()
    call_context = serializers.JSONField(
        allow_null=True, help_text="prompt_id, agent_id, agent_type, effort and prompt, as the agent sent them."
    )
    decision = DecisionOutputSerializer(allow_null=True)
    quorum = QuorumOutputSerializer(allow_null=True, help_text="Votes and ladder steps; null without either.")

    class Meta:
        ref_name = "PermissionRequest"


# Building a serializer deep-copies its fields (~0.25 ms of CPU for this one, on every
# submit); representing through one shared instance costs ~0.02 ms. `to_representation`
# keeps no state between calls, so threads may share the instance.
_REQUEST_OUTPUT = RequestOutputSerializer()


def request_output(payload: dict[str, Any]) -> dict[str, Any]:
    """A `selectors.request_payload` in `RequestOutputSerializer`'s shape (what `.data` gives)."""
    return dict(_REQUEST_OUTPUT.to_representation(payload))


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    fields = serializers.DictField(required=False)  # type: ignore[assignment]

    class Meta:
        ref_name = "ErrorDetail"


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()

    class Meta:
        ref_name = "Error"


class DenyReasonSerializer(serializers.Serializer):
    type = serializers.CharField()
    detail = serializers.CharField()

    class Meta:
        ref_name = "AuditUnavailableReason"


class AuditUnavailableDecisionSerializer(serializers.Serializer):
    behavior = serializers.CharField(help_text="always `deny`")
    reason = DenyReasonSerializer()
    message = serializers.CharField()

    class Meta:
        ref_name = "AuditUnavailableDecision"


class AuditUnavailableSerializer(serializers.Serializer):
    decision = AuditUnavailableDecisionSerializer()
    error = ErrorDetailSerializer()

    class Meta:
        ref_name = "AuditUnavailable"


class ConflictSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()
    request = RequestOutputSerializer()

    class Meta:
        ref_name = "AlreadyDecided"
