"""An `Answer` that exists is valid: each bad field is refused on creation, with the service's words."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from approvals import services

LONGEST = "m" * services.MAX_ANSWER_MESSAGE_CHARS

# (field, bad value, the ServiceError's message)
REFUSED = [
    ("behavior", "maybe", "behavior must be allow or deny, not 'maybe'"),
    ("behavior", "Allow", "behavior must be allow or deny, not 'Allow'"),
    ("remember", "forever", "remember must be one of once, session, project, always, not 'forever'"),
    ("remember_hours", 0, "remember_hours must be between 0.01 and 8784"),
    ("remember_hours", services.MAX_REMEMBER_HOURS + 1, "remember_hours must be between 0.01 and 8784"),
    ("message", LONGEST + "m", "the message may be at most 10,000 characters, not 10,001"),
]


class AnswerTests:
    @pytest.mark.parametrize(("field", "value", "message"), REFUSED, ids=[f"{f}={v!r}"[:40] for f, v, _ in REFUSED])
    def test_it_refuses_a_bad_field_on_creation(self, field: str, value: Any, message: str) -> None:
        fields: dict[str, Any] = {"behavior": "allow", "surface": "api", field: value}
        with pytest.raises(services.ServiceError) as refused:
            services.Answer(**fields)
        assert str(refused.value) == message

    def test_it_refuses_answers_to_questions_with_a_deny(self) -> None:
        with pytest.raises(services.ServiceError) as refused:
            services.Answer(behavior="deny", surface="web", answers={"Which?": "A"})
        assert str(refused.value) == "answers go with behavior allow: a declined question is a deny without answers"

    def test_it_takes_the_limits_themselves(self) -> None:
        for hours in (services.MIN_REMEMBER_HOURS, services.MAX_REMEMBER_HOURS, None):
            services.Answer(behavior="allow", surface="api", remember="always", remember_hours=hours)
        for remember in services.REMEMBER_CHOICES:
            services.Answer(behavior="allow", surface="api", remember=remember, message=LONGEST)

    def test_it_cannot_be_changed_once_made(self) -> None:
        answer = services.Answer(behavior="deny", surface="api")
        with pytest.raises(AttributeError):
            answer.behavior = "allow"  # type: ignore[misc]

    def test_it_names_who_answered(self) -> None:
        alice = User(username="alice")
        assert services.Answer(behavior="allow", surface="slack", decided_by="Bob (slack)", user=alice).by == (
            "Bob (slack)"
        )
        assert services.Answer(behavior="allow", surface="slack", user=alice).by == "alice"
        assert services.Answer(behavior="allow", surface="slack").by == "slack"
