"""Bad input gets a 4xx with an actionable message in the API's error shape, never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest

from approvals.models import PermissionRequest
from tests.approvals.conftest import ASK_CALL, Api

URL = "/api/v1/permission-requests"


def error_of(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) >= {"error"}, body
    assert body["error"]["code"] and body["error"]["message"], body
    return body["error"]


@pytest.mark.django_db
class BadSubmitTests:
    @pytest.mark.parametrize(
        ("raw", "needle"),
        [
            ("{not json", "not valid JSON"),
            ('{"tool_name": "Bash", "tool_input": {"n": NaN}}', "not valid JSON"),
            ('{"tool_name": "Bash", "tool_input": {"n": 1e999}}', "out of range"),
            ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
            (b"\xff\xfe{}", "UTF-8"),
        ],
    )
    def test_it_refuses_a_body_that_is_not_json(self, ci_bot: Any, raw: str | bytes, needle: str) -> None:
        response = Api(ci_bot.auth).post(URL, raw)
        assert response.status_code == 400
        assert needle in error_of(response)["message"]

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({}, "tool_name"),
            ({"tool_name": 42, "tool_input": {}}, "tool_name"),
            ({"tool_name": "Bash", "tool_input": "rm -rf /"}, "tool_input"),
            ({"tool_name": "Bash", "tool_input": ["a"]}, "tool_input"),
            ({"tool_name": "Bash", "permission_mode": "yolo"}, "permission_mode"),
            ({"tool_name": "Bash", "context": "batch"}, "context"),
            ({"tool_name": "Bash", "session_id": {"a": 1}}, "session_id"),
            ({"tool_name": "Bash", "tool_use_id": "x" * 201}, "tool_use_id"),
            ({"tool_name": "Bash", "tool_input": {"command": "a\u0000b"}}, "tool_input"),
            ({"tool_name": "Bash", "additional_directories": "/tmp"}, "additional_directories"),
            ({"tool_name": "Bash", "tool_inptu": {"command": "ls"}}, "tool_inptu"),
        ],
    )
    def test_it_names_the_bad_field(self, ci_bot: Any, body: dict[str, Any], field: str) -> None:
        response = Api(ci_bot.auth).post(URL, body)
        assert response.status_code == 400, response.content
        assert field in error_of(response)["fields"]
        assert not PermissionRequest.objects.exists()

    def test_it_refuses_a_top_level_array(self, ci_bot: Any) -> None:
        response = Api(ci_bot.auth).post(URL, [ASK_CALL])
        assert response.status_code == 400
        error_of(response)

    def test_it_refuses_a_body_over_one_mebibyte_with_413(self, ci_bot: Any) -> None:
        body = json.dumps({**ASK_CALL, "tool_input": {"command": "x" * (1024 * 1024)}})
        response = Api(ci_bot.auth).post(URL, body)
        assert response.status_code == 413
        assert error_of(response)["code"] == "payload_too_large"
        assert not PermissionRequest.objects.exists()

    def test_it_refuses_a_long_body_that_claims_to_be_short(self, ci_bot: Any) -> None:
        body = json.dumps({**ASK_CALL, "tool_input": {"command": "x" * (1024 * 1024)}})
        response = Api(ci_bot.auth).post(URL, body, CONTENT_LENGTH="100")
        # The body is cut at the declared length: that is broken JSON, not a huge one.
        assert response.status_code == 400

    def test_it_accepts_a_body_just_under_the_limit(self, ci_bot: Any) -> None:
        body = json.dumps({**ASK_CALL, "tool_input": {"command": "x" * (1024 * 1024 - 200)}})
        assert len(body) < 1024 * 1024
        assert Api(ci_bot.auth).post(URL, body).status_code == 202

    def test_it_refuses_form_encoded_bodies(self, ci_bot: Any) -> None:
        response = Api(ci_bot.auth).client.post(URL, {"tool_name": "Bash"}, **ci_bot.auth)
        assert response.status_code == 415
        error_of(response)

    def test_it_refuses_a_bad_wait(self, ci_bot: Any) -> None:
        response = Api(ci_bot.auth).post(URL + "?wait=soon", ASK_CALL)
        assert response.status_code == 400
        assert "wait" in error_of(response)["fields"]
        assert not PermissionRequest.objects.exists()

    def test_it_refuses_a_malformed_authorization_header(self) -> None:
        response = Api({"HTTP_AUTHORIZATION": "Token abc"}).post(URL, ASK_CALL)
        assert response.status_code == 401
        assert "Bearer" in error_of(response)["message"]


@pytest.mark.django_db
class BadPathTests:
    def test_it_answers_json_404_for_an_unknown_api_path(self, ci_bot: Any) -> None:
        response = Api(ci_bot.auth).get("/api/v1/nothing-here")
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert "/api/docs/" in error_of(response)["message"]

    def test_it_answers_json_404_for_a_malformed_request_id(self, ci_bot: Any) -> None:
        response = Api(ci_bot.auth).get("/api/v1/permission-requests/not-a-uuid")
        assert response.status_code == 404
        error_of(response)

    def test_it_answers_json_404_for_an_unknown_request(self, ci_bot: Any) -> None:
        response = Api(ci_bot.auth).get("/api/v1/permission-requests/00000000-0000-0000-0000-000000000000")
        assert response.status_code == 404
        error_of(response)

    def test_it_answers_405_in_the_error_shape(self, ci_bot: Any) -> None:
        response = Api(ci_bot.auth).call("delete", URL)
        assert response.status_code == 405
        assert "GET, POST" in error_of(response)["message"]

    @pytest.mark.parametrize(
        "query", ["state=lost", "page_size=0", "cursor=garbage", "since=yesterday", "behavior=ask", "format=xml"]
    )
    def test_it_refuses_bad_list_filters(self, api_as: Any, alice: Any, query: str) -> None:
        path = "/api/v1/audit" if query.split("=")[0] in {"since", "behavior", "format"} else URL
        response = api_as(alice).get(f"{path}?{query}")
        assert response.status_code in (400, 404), response.content
        error_of(response)
