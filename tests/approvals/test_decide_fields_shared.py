"""A person's decision's input binds its fields once, and one set serves every decision.

`PermissionRequestDecideApi.InputSerializer` is made for every decision a person sends
(`api.common.FieldsBoundOnce`). These tests hold the shared fields to what per-instance
fields gave: each validation sees only its own input, from many threads at once.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from approvals import services
from approvals.api.common import StrictSerializer
from approvals.api.requests import PermissionRequestDecideApi
from tests.approvals.shared_fields import mismatches_from_threads

Shared = PermissionRequestDecideApi.InputSerializer


class PerInstance(StrictSerializer):
    """The same fields and checks, the fields deep-copied per instance as DRF does by default."""

    validate = Shared.validate
    validate_answers = Shared.validate_answers
    validate_updated_input = Shared.validate_updated_input


# Set after the class is made: DRF's metaclass sets it from the class's own attributes.
PerInstance._declared_fields = Shared._declared_fields


# (an input, the field its refusal names; "" for an input that is valid)
INPUTS: list[tuple[dict[str, Any], str]] = [
    ({"behavior": "allow"}, ""),
    ({"behavior": "deny", "message": "not on main", "interrupt": True}, ""),
    ({"behavior": "allow", "remember": "session"}, ""),
    ({"behavior": "allow", "remember": "always", "remember_hours": 24}, ""),
    ({"behavior": "allow", "updated_input": {"command": "ls -la"}}, ""),
    ({"behavior": "allow", "answers": {"Which?": "A", "Both?": ["x", "y"]}}, ""),
    ({"behavior": "maybe"}, "behavior"),
    ({}, "behavior"),
    ({"behavior": "allow", "interrupt": True}, "interrupt"),
    ({"behavior": "allow", "message": 5}, "message"),
    ({"behavior": "allow", "message": "m" * (services.MAX_ANSWER_MESSAGE_CHARS + 1)}, "message"),
    ({"behavior": "allow", "remember": "forever"}, "remember"),
    ({"behavior": "allow", "remember_hours": -1}, "remember_hours"),
    ({"behavior": "allow", "updated_input": ["ls"]}, "updated_input"),
    ({"behavior": "allow", "updated_input": {"command": "a\x00b"}}, "updated_input"),
    ({"behavior": "allow", "answers": {"Which?": "a\x00"}}, "answers"),
    ({"behavior": "allow", "surprise": 1}, "surprise"),
]


def outcome(cls: type[serializers.Serializer], data: dict[str, Any]) -> tuple[str, Any]:
    serializer = cls(data=data)
    if serializer.is_valid():
        return "valid", dict(serializer.validated_data)
    return "invalid", sorted(serializer.errors)


class SharedDecideFieldsTests:
    def test_every_decision_is_validated_by_one_set_of_fields(self) -> None:
        assert Shared(data={"behavior": "allow"}).fields is Shared(data={}).fields

    def test_each_input_is_judged_as_with_fields_of_its_own(self) -> None:
        for data, field in INPUTS:
            found = outcome(Shared, data)
            assert found == outcome(PerInstance, data), data
            if field:
                assert found[0] == "invalid" and field in found[1], (data, found)
            else:
                assert found[0] == "valid", (data, found)

    def test_threads_validating_at_once_get_what_one_thread_gets(self) -> None:
        assert mismatches_from_threads(lambda data: outcome(Shared, data), [data for data, _ in INPUTS]) == []
