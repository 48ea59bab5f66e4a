"""Submitting a tool call over HTTP: decided now, pending, and idempotent replay."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from approvals.models import Decision, PermissionRequest, Rule
from tests.approvals.conftest import ASK_CALL, Api

URL = "/api/v1/permission-requests"


@pytest.mark.django_db
class SubmitTests:
    def test_it_answers_200_with_the_rule_that_decided(self, ci_bot: Any, default_team: Any) -> None:
        Rule.objects.create(rule="Bash(make build)", behavior="allow", source="projectSettings", team=default_team)
        response = Api(ci_bot.auth).post(URL, {"tool_name": "Bash", "tool_input": {"command": "make build"}})
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["status"] == "decided"
        assert body["decision"]["behavior"] == "allow"
        assert body["decision"]["reason"] == {
            "type": "rule",
            "rule": "Bash(make build)",
            "source": "projectSettings",
            "behavior": "allow",
        }
        assert Decision.objects.get(request_id=body["id"]).rule == "Bash(make build)"

    def test_it_answers_202_pending_for_an_ask(self, ci_bot: Any) -> None:
        response = Api(ci_bot.auth).post(URL, ASK_CALL)
        assert response.status_code == 202, response.content
        body = response.json()
        assert body["status"] == "pending"
        assert body["decision"] is None
        assert body["destructive_warning"]
        assert PermissionRequest.objects.get(pk=body["id"]).state == "pending"

    def test_it_denies_a_malformed_call_as_data_with_an_audit_row(self, ci_bot: Any) -> None:
        response = Api(ci_bot.auth).post(URL, {"tool_name": "TaskList", "tool_input": {"surprise": 1}})
        assert response.status_code == 200
        decision = response.json()["decision"]
        assert decision["behavior"] == "deny"
        assert "InputValidationError: TaskList failed" in decision["message"]
        assert Decision.objects.filter(tool_name="TaskList").count() == 1

    def test_it_returns_the_same_request_when_a_tool_use_id_is_replayed(self, ci_bot: Any) -> None:
        api = Api(ci_bot.auth)
        call = {**ASK_CALL, "tool_use_id": "toolu_replay"}
        first = api.post(URL, call).json()
        second = api.post(URL, call)
        assert second.status_code == 202
        assert second.json()["id"] == first["id"]
        assert second.json()["tool_input"] == ASK_CALL["tool_input"]
        # Reusing the id for another call is refused: it must not inherit the first answer.
        other = api.post(URL, {**call, "tool_input": {"command": "something else"}})
        assert other.status_code == 409
        assert other.json()["error"]["code"] == "tool_use_id_reused"
        assert PermissionRequest.objects.filter(tool_use_id="toolu_replay").count() == 1

    def test_it_replays_a_decided_request_with_its_decision(self, ci_bot: Any) -> None:
        api = Api(ci_bot.auth)
        call = {"tool_name": "TaskList", "tool_use_id": "toolu_decided"}
        first = api.post(URL, call).json()
        again = api.post(URL, call)
        assert again.status_code == 200
        assert again.json()["decision"]["id"] == first["decision"]["id"]
        assert Decision.objects.filter(request__tool_use_id="toolu_decided").count() == 1

    def test_it_keeps_tool_use_ids_apart_per_agent(self, ci_bot: Any, other_bot: Any) -> None:
        call = {**ASK_CALL, "tool_use_id": "toolu_shared"}
        mine = Api(ci_bot.auth).post(URL, call).json()
        theirs = Api(other_bot.auth).post(URL, call).json()
        assert mine["id"] != theirs["id"]


@pytest.mark.django_db(transaction=True)
class ConcurrentReplayTests:
    def test_it_creates_one_request_when_eight_threads_replay_at_once(self, ci_bot: Any) -> None:
        call = {**ASK_CALL, "tool_use_id": "toolu_race"}
        barrier = threading.Barrier(8)
        answers: list[tuple[int, str]] = []
        errors: list[BaseException] = []

        def submit() -> None:
            try:
                api = Api(ci_bot.auth)
                barrier.wait(timeout=10)
                response = api.post(URL, call)
                answers.append((response.status_code, response.json()["id"]))
            except BaseException as exc:  # reported below, with the thread's answer
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=submit) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors, errors
        assert len(answers) == 8
        assert {status for status, _ in answers} == {202}
        assert len({request_id for _, request_id in answers}) == 1
        assert PermissionRequest.objects.filter(tool_use_id="toolu_race").count() == 1


# The wait reads the database through channels' database_sync_to_async, which closes
# the thread's connection afterwards: only a transactional test database survives that.
@pytest.mark.django_db(transaction=True)
class WaitCapTests:
    def test_it_caps_the_wait_at_gatehouse_max_wait(self, ci_bot: Any, settings: Any) -> None:
        import time

        settings.GATEHOUSE_MAX_WAIT = 0.3
        started = time.monotonic()
        response = Api(ci_bot.auth).post(f"{URL}?wait=120", ASK_CALL)
        elapsed = time.monotonic() - started
        assert response.status_code == 202
        assert 0.25 < elapsed < 10, elapsed

    def test_it_answers_at_once_without_a_wait(self, ci_bot: Any) -> None:
        import time

        started = time.monotonic()
        assert Api(ci_bot.auth).post(URL, ASK_CALL).status_code == 202
        assert time.monotonic() - started < 10
