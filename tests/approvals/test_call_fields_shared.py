"""The call's spec binds its fields once, and one set of fields serves every call.

`calls.ToolCallSerializer` is made for every call an agent sends; DRF would deep-copy
its fields each time (`api.common.FieldsBoundOnce`). These tests hold the shared fields
to what per-instance fields gave: each validation sees only its own call, from any
number of threads at once, and the fields keep no call after it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.calls import CallInvalid, ToolCallSerializer, error_sentence, parse_call
from tests.approvals.shared_fields import mismatches_from_threads

GOOD = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "session_id": "s1", "cwd": "/tmp/proj"}

# (a call, the field its refusal names; "" for a call that is valid)
CALLS: list[tuple[dict[str, Any], str]] = [
    (GOOD, ""),
    ({**GOOD, "tool_input": {"command": "rm -rf build"}, "tool_use_id": "toolu_7"}, ""),
    ({**GOOD, "session_id": "s" * 201}, "session_id"),
    ({**GOOD, "tool_input": ["ls"]}, "tool_input"),
    ({**GOOD, "cwd": 5}, "cwd"),
    ({**GOOD, "tool_name": ""}, "tool_name"),
    ({**GOOD, "surprise": 1}, "surprise"),
    ({**GOOD, "additional_directories": ["/a"] * 101}, "additional_directories"),
    ({**GOOD, "permission_mode": "yolo"}, "permission_mode"),
    ({**GOOD, "call_context": {"agent_id": "a" * 201}}, "call_context"),
    ({**GOOD, "additional_directories": ["/srv/a", "/srv/b"], "permission_mode": "plan"}, ""),
]


def outcome(call: dict[str, Any]) -> tuple[str, Any]:
    serializer = ToolCallSerializer(data=call)
    if serializer.is_valid():
        return "valid", dict(serializer.validated_data)
    return "invalid", error_sentence(serializer.errors)


class SharedFieldsTests:
    def test_every_call_is_validated_by_one_set_of_fields(self) -> None:
        assert ToolCallSerializer(data=GOOD).fields is ToolCallSerializer(data={}).fields

    def test_each_refusal_names_its_own_field_and_each_valid_call_keeps_its_own_values(self) -> None:
        for call, field in CALLS:
            kind, found = outcome(call)
            if field:
                named = found.startswith(f"{field}:") or f"; {field}:" in found
                assert kind == "invalid" and named, (call, found)
            else:
                assert kind == "valid" and found["tool_input"] == call["tool_input"], (call, found)

    def test_threads_validating_at_once_get_what_one_thread_gets(self) -> None:
        assert mismatches_from_threads(outcome, [call for call, _ in CALLS]) == []

    def test_the_fields_keep_no_call_after_it(self) -> None:
        secret = {**GOOD, "tool_input": {"command": "echo hunter2"}}
        parse_call(secret)
        fields = ToolCallSerializer().fields
        root = fields["tool_input"].root
        assert not hasattr(root, "initial_data")
        assert root.context == {}

    @settings(max_examples=60, deadline=None)
    @given(
        # Text a JSON body can carry: NUL and lone surrogates are refused by their own checks.
        command=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40),
        session=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=250),
    )
    def test_validated_data_is_the_call_itself(self, command: str, session: str) -> None:
        call = {**GOOD, "tool_input": {"command": command}, "session_id": session}
        # Text fields are trimmed, then measured (DRF's CharField), as before the fields were shared.
        try:
            parsed = parse_call(call)
        except CallInvalid as exc:
            assert len(session.strip()) > 200 and "session_id" in str(exc)
            return
        assert (parsed["tool_input"], parsed["session_id"]) == ({"command": command}, session.strip())
