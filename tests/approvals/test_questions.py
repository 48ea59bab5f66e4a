"""AskUserQuestion answered from afar: on the card, through the API, on Telegram and Slack.

Every surface's answer becomes an allow whose `updated_input` is the questions plus
`answers` (question text → chosen label), the shape Claude Code 2.1.332 runs without
asking at the terminal (tests/e2e/claude_code/test_claude_questions.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.relay.bridges.conftest import decision_of

pytestmark = pytest.mark.django_db(transaction=True)

DB = "Which database should we use?"
TESTS = "Which checks should run?"
QUESTIONS = [
    {
        "question": DB,
        "header": "Database",
        "options": [{"label": "PostgreSQL", "description": "a server"}, {"label": "SQLite", "description": "a file"}],
        "multiSelect": False,
    }
]
MULTI = {
    "question": TESTS,
    "header": "Checks",
    "options": [{"label": "unit", "description": ""}, {"label": "e2e", "description": ""}, {"label": "lint"}],
    "multiSelect": True,
}


def ask_question(agent: Any, questions: list[dict[str, Any]] | None = None) -> Any:
    from approvals import services

    call = {"tool_name": "AskUserQuestion", "tool_input": {"questions": questions or QUESTIONS}, "session_id": "s1"}
    result = services.request_submit(agent=agent, call=call)
    assert result.decision is None, f"an AskUserQuestion call is a person's to answer, not {result.decision}"
    return result.request


class AnswerShapeTests:
    @pytest.mark.parametrize(
        ("answers", "problem"),
        [
            ({}, "no answer for"),
            ({DB: "MySQL"}, "is not an option"),
            ({DB: ["PostgreSQL", "SQLite"]}, "takes one answer"),
            ({DB: "SQLite", "Other?": "x"}, "no such question"),
            ({DB: 3}, "must be one of its labels"),
            ("SQLite", "must be a JSON object"),
        ],
    )
    def test_an_answer_that_does_not_fit_is_refused(self, answers: Any, problem: str) -> None:
        from approvals.questions import AnswerInvalid, answered_input

        with pytest.raises(AnswerInvalid, match=problem):
            answered_input("AskUserQuestion", {"questions": QUESTIONS}, answers)

    def test_answers_are_only_for_questions(self) -> None:
        from approvals.questions import AnswerInvalid, answered_input

        with pytest.raises(AnswerInvalid, match="only for an AskUserQuestion"):
            answered_input("Bash", {"command": "ls"}, {DB: "SQLite"})

    def test_a_multiple_choice_answer_is_joined_as_claude_code_joins_it(self) -> None:
        from approvals.questions import answered_input

        updated = answered_input(
            "AskUserQuestion", {"questions": [*QUESTIONS, MULTI]}, {DB: "SQLite", TESTS: ["unit", "lint"]}
        )
        assert updated["answers"] == {DB: "SQLite", TESTS: "unit, lint"}
        assert updated["questions"] == [*QUESTIONS, MULTI]


class ApiAnswerTests:
    def test_post_decision_with_answers_allows_with_the_answers(self, client: Any, alice: Any, ci_bot: Any) -> None:
        request = ask_question(ci_bot.agent)
        client.force_login(alice)
        url = f"/api/v1/permission-requests/{request.pk}/decision"
        bad = client.post(url, {"behavior": "allow", "answers": {DB: "MySQL"}}, content_type="application/json")
        assert bad.status_code == 400 and "is not an option" in bad.content.decode()
        assert decision_of(request) is None  # a refused answer loses nothing: still pending
        declined = client.post(url, {"behavior": "deny", "answers": {DB: "SQLite"}}, content_type="application/json")
        assert declined.status_code == 400
        answered = client.post(url, {"behavior": "allow", "answers": {DB: "SQLite"}}, content_type="application/json")
        assert answered.status_code == 200, answered.content
        decision = answered.json()["decision"]
        assert decision["behavior"] == "allow"
        assert decision["updated_input"] == {"questions": QUESTIONS, "answers": {DB: "SQLite"}}


class CardAnswerTests:
    def test_the_card_shows_the_questions_and_its_form_answers_them(self, client: Any, alice: Any, ci_bot: Any) -> None:
        request = ask_question(ci_bot.agent, [*QUESTIONS, MULTI])
        client.force_login(alice)
        page = client.get("/").content.decode()
        assert DB in page and TESTS in page
        assert 'type="radio" name="answer-0" value="PostgreSQL"' in page
        assert 'type="checkbox" name="answer-1" value="lint"' in page
        assert "a file" in page  # the option's description
        assert "Allow once" not in page  # a question is answered, not allowed
        post = {"action": "answer", "answer-0": "PostgreSQL", "answer-1": ["e2e", "lint"]}
        response = client.post(f"/requests/{request.pk}/decide", post, HTTP_ACCEPT="application/json")
        assert response.status_code == 200, response.content
        decision = decision_of(request)
        assert decision.updated_input["answers"] == {DB: "PostgreSQL", TESTS: "e2e, lint"}
        assert decision.surface == "web" and decision.decided_by == "alice"
        # The decided card says what was answered.
        assert "PostgreSQL" in response.json()["html"] and "answer" in response.json()["html"]

    def test_an_incomplete_answer_is_a_clear_400(self, client: Any, alice: Any, ci_bot: Any) -> None:
        request = ask_question(ci_bot.agent, [*QUESTIONS, MULTI])
        client.force_login(alice)
        post = {"action": "answer", "answer-0": "PostgreSQL"}
        response = client.post(f"/requests/{request.pk}/decide", post, HTTP_ACCEPT="application/json")
        assert response.status_code == 400 and f"no answer for {TESTS!r}" in response.json()["message"]
        assert decision_of(request) is None


class AllowWithoutAnswersTests:
    """No door allows a question call without its answers: the API, the card's buttons, a batch."""

    def test_the_api_refuses_a_bare_allow_and_keeps_the_ask(self, client: Any, alice: Any, ci_bot: Any) -> None:
        request = ask_question(ci_bot.agent)
        client.force_login(alice)
        url = f"/api/v1/permission-requests/{request.pk}/decision"
        for body in ({"behavior": "allow"}, {"behavior": "allow", "remember": "session"}):
            response = client.post(url, body, content_type="application/json")
            assert response.status_code == 400 and "asks the person questions" in response.content.decode()
        assert decision_of(request) is None
        assert client.post(url, {"behavior": "deny"}, content_type="application/json").status_code == 200

    @pytest.mark.parametrize("action", ["once", "session", "always"])
    def test_a_posted_allow_button_is_refused(self, client: Any, alice: Any, ci_bot: Any, action: str) -> None:
        request = ask_question(ci_bot.agent)
        client.force_login(alice)
        response = client.post(f"/requests/{request.pk}/decide", {"action": action}, HTTP_ACCEPT="application/json")
        assert response.status_code == 400 and "asks the person questions" in response.json()["message"]
        assert decision_of(request) is None

    def test_a_batch_of_identical_questions_is_refused_whole(self, alice: Any, ci_bot: Any) -> None:
        from approvals import services

        requests = [ask_question(ci_bot.agent) for _ in range(3)]
        with pytest.raises(services.ServiceError, match="asks the person questions"):
            services.request_decide_batch(requests=requests, behavior="allow", surface="web", user=alice)
        assert all(decision_of(request) is None for request in requests)
