"""Text that is not text, and cursors we never gave out: a clear 400 or error frame, never a 500.

Python's `json` turns an escaped lone surrogate (`"\\ud800"`) into a string no UTF-8
encoder can write, so it used to fail later, while storing, as a 500. The corpus puts
each surrogate spelling into every place of a body or frame, on every entry point.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect

from approvals import services, strict_json
from tests.e2e.claude_code.hookrun import hook_input
from tests.live import LiveServer
from tests.relay.wsclient import ask_call, receive, send

pytestmark = pytest.mark.django_db(transaction=True)

LONE_SURROGATES = [r"\ud800", r"\udfff", r"\uDBFF", r"\ud83d", r"\ude00", r"\ude00\ud83d", r"x\ud800y", r"\ud83d\ud83d"]
PLACES = ["command", "tool_name", "session_id", "cwd", "key", "nested"]
MARK = "@@MARK@@"


def with_mark(call: dict[str, Any], place: str) -> dict[str, Any]:
    """The call with MARK where the surrogate will go (text replaced after json.dumps)."""
    call = json.loads(json.dumps(call))
    if place == "command":
        call["tool_input"]["command"] = f"ls {MARK}"
    elif place == "key":
        call["tool_input"][MARK] = "v"
    elif place == "nested":
        call["tool_input"]["extra"] = [{"deep": [MARK]}]
    else:
        call[place] = MARK
    return call


def body_text(call: dict[str, Any], place: str, escape: str) -> str:
    return json.dumps(with_mark(call, place)).replace(MARK, escape)


class LoneSurrogateHttpTests:
    @pytest.mark.parametrize("escape", LONE_SURROGATES)
    def test_it_answers_400_on_the_api_for_a_lone_surrogate_anywhere(self, ci_bot: Any, escape: str) -> None:
        client = Client(raise_request_exception=False)
        for place in PLACES:
            body = body_text(ask_call(), place, escape)
            response = client.post(
                "/api/v1/permission-requests", data=body, content_type="application/json", **ci_bot.auth
            )
            assert response.status_code == 400, (place, response.status_code, response.content[:200])
            assert "surrogate" in response.content.decode()

    @pytest.mark.parametrize("escape", LONE_SURROGATES)
    def test_it_answers_400_on_the_hook_endpoint_for_a_lone_surrogate_anywhere(self, ci_bot: Any, escape: str) -> None:
        client = Client(raise_request_exception=False)
        for place in PLACES:
            body = body_text(hook_input("PreToolUse"), place, escape)
            response = client.post(
                "/hooks/claude-code?wait=0", data=body, content_type="application/json", **ci_bot.auth
            )
            assert response.status_code == 400, (place, response.status_code, response.content[:200])

    def test_it_still_accepts_a_proper_surrogate_pair(self, ci_bot: Any) -> None:
        body = body_text(ask_call(), "command", r"\ud83d\ude00")
        response = Client().post(
            "/api/v1/permission-requests", data=body, content_type="application/json", **ci_bot.auth
        )
        assert response.status_code in (200, 201, 202), response.content[:200]


class LoneSurrogateSocketTests:
    def test_it_answers_an_error_frame_for_a_lone_surrogate_and_keeps_the_socket(
        self, security_server: LiveServer, ci_bot: Any
    ) -> None:
        async def scenario() -> list[dict[str, Any]]:
            answers = []
            headers = {"Authorization": f"Bearer {ci_bot.token}"}
            async with connect(f"{security_server.ws_url}/ws/agent/", additional_headers=headers, proxy=None) as ws:
                for escape in LONE_SURROGATES:
                    for place in PLACES:
                        frame = {"type": "permission_request", "ref": "r", "request": with_mark(ask_call(), place)}
                        await ws.send(json.dumps(frame).replace(MARK, escape))
                        answers.append(await receive(ws))
                await send(ws, {"type": "permission_request", "ref": "ok", "request": ask_call("ls")})
                answers.append(await receive(ws))
            return answers

        answers = asyncio.run(scenario())
        refused, last = answers[:-1], answers[-1]
        assert all(a["type"] == "error" and a["code"] == "invalid_json" for a in refused), refused
        assert last["type"] != "error"  # the socket still serves


surrogate_texts = st.lists(
    st.one_of(
        st.sampled_from(["a", "\\n", '\\"', "\\ud83d\\ude00"]), st.integers(0xD800, 0xDFFF).map(lambda c: f"\\u{c:04x}")
    ),
    min_size=1,
    max_size=6,
)


class StrictJsonCorpusTests:
    @settings(max_examples=300, deadline=None)
    @given(pieces=surrogate_texts)
    def test_it_refuses_exactly_the_texts_that_leave_a_lone_surrogate(self, pieces: list[str]) -> None:
        text = json.dumps({"k": MARK}).replace(MARK, "".join(pieces))
        decoded = json.loads(text)["k"]
        try:
            decoded.encode("utf-8")
            writable = True
        except UnicodeEncodeError:
            writable = False
        if writable:
            assert strict_json.loads(text) == {"k": decoded}
        else:
            with pytest.raises(strict_json.LoneSurrogateError):
                strict_json.loads(text)


def cursor(query: str) -> str:
    return base64.b64encode(query.encode()).decode()


TAMPERED_CURSORS = [
    "not-base64!",
    "é",
    cursor("p=abc"),
    cursor("p=1.5"),
    cursor("p=-1"),
    cursor("p=99999999999999999999999999"),
    cursor("p=١٢"),
    cursor("p="),
    cursor("o=x"),
    cursor("o=-1&p=1"),
    cursor("r=x&p=1"),
    cursor("p=2024-01-01T00:00:00"),
    base64.b64encode("p=\u00e9".encode()).decode(),
]


class TamperedCursorTests:
    @pytest.mark.parametrize("value", TAMPERED_CURSORS)
    def test_it_answers_400_for_a_cursor_the_server_never_gave_out(self, alice: Any, ci_bot: Any, value: str) -> None:
        services.request_submit(agent=ci_bot.agent, call={**ask_call("ls"), "tool_use_id": "cursor-row"})
        client = Client(raise_request_exception=False)
        client.force_login(alice)
        response = client.get("/api/v1/audit", {"cursor": value})
        assert response.status_code == 400, (value, response.status_code, response.content[:200])
        assert "cursor" in json.dumps(response.json())

    def test_it_follows_a_cursor_it_gave_out(self, alice: Any, ci_bot: Any, default_team: Any) -> None:
        services.rule_create(rule="Bash(ls:*)", behavior="allow", source="policySettings", team=default_team)
        for index in range(3):
            services.request_submit(agent=ci_bot.agent, call={**ask_call("ls"), "tool_use_id": f"page-{index}"})
        client = Client()
        client.force_login(alice)
        first = client.get("/api/v1/audit", {"page_size": 1}).json()
        assert first["next"]
        assert client.get(first["next"]).status_code == 200
