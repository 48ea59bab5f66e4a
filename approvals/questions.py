"""AskUserQuestion answered from afar: its questions, and the input that carries the answers.

Claude Code 2.1.332 runs an AskUserQuestion call whose hook answer is `allow` with
`updatedInput` = the questions plus `answers`, question text → chosen label, and shows
the model "Your questions have been answered: ..." without asking at the terminal
(`tests/e2e/claude_code/test_claude_questions.py`). Every surface (the dashboard card,
Telegram, Slack, `POST …/decision` with `answers`) builds that input here, so an answer
is checked the same way wherever it was given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TOOL = "AskUserQuestion"
# Claude Code joins the labels of a multiple-choice answer with ", ".
MULTI_JOIN = ", "


class AnswerInvalid(ValueError):
    """The answers do not fit the call's questions; the message says which and why."""


@dataclass(frozen=True)
class Question:
    text: str
    header: str
    options: tuple[tuple[str, str], ...]  # (label, description)
    multi: bool

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(label for label, _ in self.options)


def questions_of(tool_name: str, tool_input: Any) -> list[Question]:
    """The questions of an AskUserQuestion call; [] for any other call or a malformed one."""
    if tool_name != TOOL or not isinstance(tool_input, dict) or not isinstance(tool_input.get("questions"), list):
        return []
    found = []
    for item in tool_input["questions"]:
        if not isinstance(item, dict) or not isinstance(item.get("question"), str):
            return []
        options = []
        for option in item.get("options") or []:
            if not isinstance(option, dict) or not isinstance(option.get("label"), str):
                return []
            description = option.get("description")
            options.append((option["label"], description if isinstance(description, str) else ""))
        header = item.get("header")
        found.append(
            Question(
                item["question"],
                header if isinstance(header, str) else "",
                tuple(options),
                bool(item.get("multiSelect")),
            )
        )
    return found


def answered_input(tool_name: str, tool_input: Any, answers: Any) -> dict[str, Any]:
    """The call's input with `answers`, after checking every answer against its question.

    - `answers` maps each question's text to one of its option labels (a list of labels
      for a multiple-choice question, joined as Claude Code joins them).
    - Every question needs an answer; an unknown question or label is refused.
    """
    questions = questions_of(tool_name, tool_input)
    if not questions:
        raise AnswerInvalid("answers are only for an AskUserQuestion call, and this call asks no questions")
    if not isinstance(answers, dict):
        raise AnswerInvalid("answers must be a JSON object: question text → chosen label")
    by_text = {q.text: q for q in questions}
    unknown = [key for key in answers if key not in by_text]
    if unknown:
        raise AnswerInvalid(f"no such question: {unknown[0]!r}")
    result: dict[str, str] = {}
    for question in questions:
        if question.text not in answers:
            raise AnswerInvalid(f"no answer for {question.text!r}")
        chosen = answers[question.text]
        picked = chosen if isinstance(chosen, list) else [chosen]
        if not picked or not all(isinstance(label, str) for label in picked):
            raise AnswerInvalid(f"the answer to {question.text!r} must be one of its labels")
        if len(picked) > 1 and not question.multi:
            raise AnswerInvalid(f"{question.text!r} takes one answer, not {len(picked)}")
        for label in picked:
            if label not in question.labels:
                raise AnswerInvalid(
                    f"{label!r} is not an option of {question.text!r} (options: {', '.join(question.labels)})"
                )
        result[question.text] = MULTI_JOIN.join(picked)
    return {**tool_input, "answers": result}


def answers_from_form(tool_name: str, tool_input: Any, data: Any) -> dict[str, Any]:
    """The answers a card's form posted: field `answer-<n>` for the n-th question."""
    answers: dict[str, Any] = {}
    for index, question in enumerate(questions_of(tool_name, tool_input)):
        picked = [value for value in data.getlist(f"answer-{index}") if isinstance(value, str)]
        if picked:
            answers[question.text] = picked if question.multi else picked[0]
    return answers
