"""NUL characters are handled alike at every door: the REST API, the agent socket, the hook.

PostgreSQL cannot store NUL in text or JSON, so a NUL that reached the database was a
500 / "internal" error frame there and stored as sent on SQLite. A call, a cancel reason
or a PermissionDenied record holding one is refused (400 / `invalid_frame`) by every
door; a tool's result, which reports what already ran, is kept with each NUL shown as ␀.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals import services
from approvals.models import PermissionRequest, RequestState
from approvals.services.decide import nul_visible
from tests.live import LiveServer
from tests.relay.wsclient import agent_connect, ask_call, receive_until, send

NUL = "\x00"
SHOWN = "\u2400"
_ids = itertools.count()

# Where a tool's result may carry a NUL: (name, result value, the value as stored).
RESULTS: list[tuple[str, Any, Any]] = [
    ("in the output", f"a{NUL}b", f"a{SHOWN}b"),
    ("only NUL", NUL * 3, SHOWN * 3),
    ("in a nested value", {"stdout": [f"x{NUL}"], "code": 0}, {"stdout": [f"x{SHOWN}"], "code": 0}),
    ("in a key", {f"k{NUL}": True}, {f"k{SHOWN}": True}),
    ("deep in a list", [[[f"{NUL}z"]]], [[[f"{SHOWN}z"]]]),
]


def allowed_request(ci_bot: Any, alice: Any) -> PermissionRequest:
    call = {**ask_call(), "tool_use_id": f"toolu_nul{next(_ids)}"}
    request = services.request_submit(agent=ci_bot.agent, call=call).request
    services.request_decide(request.pk, services.Answer(behavior="allow", surface="web", user=alice))
    return PermissionRequest.objects.get(pk=request.pk)


def hook_post(server: LiveServer, token: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{server.url}/hooks/claude-code", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


@pytest.mark.django_db(transaction=True)
class ToolResultTests:
    @pytest.mark.parametrize(("where", "value", "stored"), RESULTS, ids=[row[0] for row in RESULTS])
    @pytest.mark.parametrize("door", ["socket", "hook"])
    def test_a_result_with_nul_is_kept_with_the_nul_shown(
        self, security_server: LiveServer, ci_bot: Any, alice: Any, door: str, where: str, value: Any, stored: Any
    ) -> None:
        request = allowed_request(ci_bot, alice)
        if door == "hook":
            body = {
                "hook_event_name": "PostToolUse",
                "tool_name": "Bash",
                "tool_input": request.tool_input,
                "tool_use_id": request.tool_use_id,
                "session_id": "s1",
                "cwd": "/tmp/proj",
                "tool_response": value,
            }
            assert hook_post(security_server, ci_bot.token, body).status_code == 200
        else:

            async def scenario() -> dict[str, Any]:
                async with agent_connect(security_server, ci_bot.token) as ws:
                    frame = {"type": "tool_result", "id": str(request.pk), "ref": "t", "ok": True, "output": value}
                    await send(ws, frame)
                    await send(ws, {"type": "no-such-frame", "ref": "ping"})
                    return await receive_until(ws, lambda f: f.get("ref") in ("t", "ping"))

            answer = asyncio.run(scenario())
            assert answer.get("ref") == "ping", answer  # the result was taken without an error
        assert PermissionRequest.objects.get(pk=request.pk).result == {"ok": True, "output": stored}

    @pytest.mark.parametrize("door", ["socket", "hook"])
    def test_a_failure_message_with_nul_is_kept_with_the_nul_shown(
        self, security_server: LiveServer, ci_bot: Any, alice: Any, door: str
    ) -> None:
        request = allowed_request(ci_bot, alice)
        if door == "hook":
            body = {
                "hook_event_name": "PostToolUseFailure",
                "tool_name": "Bash",
                "tool_input": request.tool_input,
                "tool_use_id": request.tool_use_id,
                "error": f"exit 1{NUL}",
            }
            assert hook_post(security_server, ci_bot.token, body).status_code == 200
        else:

            async def scenario() -> None:
                async with agent_connect(security_server, ci_bot.token) as ws:
                    frame = {
                        "type": "tool_result",
                        "id": str(request.pk),
                        "ref": "t",
                        "ok": False,
                        "error": "exit 1\x00",
                    }
                    await send(ws, frame)
                    await send(ws, {"type": "no-such-frame", "ref": "ping"})
                    answer = await receive_until(ws, lambda f: f.get("ref") in ("t", "ping"))
                    assert answer.get("ref") == "ping", answer

            asyncio.run(scenario())
        assert PermissionRequest.objects.get(pk=request.pk).result == {"ok": False, "error": f"exit 1{SHOWN}"}


@pytest.mark.django_db(transaction=True)
class CancelReasonTests:
    @pytest.mark.parametrize("reason", [NUL, f"done{NUL}", f"{NUL}x" * 10])
    @pytest.mark.parametrize("door", ["rest", "socket"])
    def test_a_cancel_reason_with_nul_is_refused_at_both_doors(
        self, security_server: LiveServer, ci_bot: Any, door: str, reason: str
    ) -> None:
        request = services.request_submit(
            agent=ci_bot.agent, call={**ask_call(), "tool_use_id": f"toolu_nul{next(_ids)}"}
        ).request
        if door == "rest":
            response = httpx.post(
                f"{security_server.url}/api/v1/permission-requests/{request.pk}/cancel",
                json={"reason": reason},
                headers={"Authorization": f"Bearer {ci_bot.token}"},
                timeout=30,
            )
            assert response.status_code == 400, response.text
        else:

            async def scenario() -> dict[str, Any]:
                async with agent_connect(security_server, ci_bot.token) as ws:
                    await send(ws, {"type": "cancel", "id": str(request.pk), "ref": "c", "reason": reason})
                    return await receive_until(ws, lambda f: f.get("ref") == "c")

            frame = asyncio.run(scenario())
            assert (frame["type"], frame["code"]) == ("error", "invalid_frame"), frame
            assert "NUL" in frame["message"]
        assert PermissionRequest.objects.get(pk=request.pk).state == RequestState.PENDING


# Where a PermissionDenied record may carry a NUL: each is refused, as a submitted call is.
DENIED_BODIES: list[tuple[str, dict[str, Any]]] = [
    ("in the command", {"tool_input": {"command": f"rm{NUL} -rf /"}}),
    ("in a key of the input", {"tool_input": {f"command{NUL}": "ls"}}),
    ("in the reason", {"reason": f"classifier{NUL}"}),
    ("in the cwd", {"cwd": f"/tmp/{NUL}"}),
    ("in the session id", {"session_id": f"s{NUL}"}),
    ("in the tool name", {"tool_name": f"Bash{NUL}"}),
    ("in the tool_use_id", {"tool_use_id": f"toolu_{NUL}"}),
]


@pytest.mark.django_db(transaction=True)
class PermissionDeniedTests:
    @pytest.mark.parametrize(("where", "change"), DENIED_BODIES, ids=[row[0] for row in DENIED_BODIES])
    def test_a_permission_denied_record_with_nul_is_refused(
        self, security_server: LiveServer, ci_bot: Any, where: str, change: dict[str, Any]
    ) -> None:
        body = {
            "hook_event_name": "PermissionDenied",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf /"},
            "tool_use_id": f"toolu_nul{next(_ids)}",
            "session_id": "s1",
            "cwd": "/tmp/proj",
            "permission_mode": "auto",
            "reason": "the classifier refused",
            **change,
        }
        response = hook_post(security_server, ci_bot.token, body)
        assert response.status_code == 400 and "NUL" in response.text, (response.status_code, response.text)
        assert not PermissionRequest.objects.exists()

    def test_a_permission_denied_record_without_nul_is_recorded(self, security_server: LiveServer, ci_bot: Any) -> None:
        body = {
            "hook_event_name": "PermissionDenied",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf /"},
            "tool_use_id": "toolu_nul_control",
            "session_id": "s1",
            "cwd": "/tmp/proj",
            "permission_mode": "auto",
            "reason": "the classifier refused",
        }
        assert hook_post(security_server, ci_bot.token, body).status_code == 200
        decision = PermissionRequest.objects.get(tool_use_id="toolu_nul_control").decision
        assert decision is not None and decision.behavior == "deny"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.characters(exclude_characters=SHOWN)),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet=st.characters(exclude_characters=SHOWN), max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [key, *_strings(item)]]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _nul_back(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(SHOWN, NUL)
    if isinstance(value, dict):
        return {_nul_back(k): _nul_back(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nul_back(v) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_nul_visible_leaves_no_nul_and_loses_nothing(value: Any) -> None:
    shown = nul_visible(value)
    assert not any(NUL in text for text in _strings(shown))
    assert _nul_back(shown) == value
