"""An answer's limits are the same on every surface: the card's form, the API and the service.

The chat bridges call the service directly, so the three doors below (and the batch
form and API, for the message) are every way an answer arrives. Each answer in the table
is refused (or taken) alike by all three, and a refused answer leaves the request pending.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from approvals import services
from approvals.models import PermissionRequest, RequestState

LONGEST = "m" * services.MAX_ANSWER_MESSAGE_CHARS

# (message, remember, hours, taken)
ANSWERS = [
    (LONGEST, "once", None, True),
    (LONGEST + "m", "once", None, False),
    ("", "always", services.MAX_REMEMBER_HOURS, True),
    ("", "always", services.MAX_REMEMBER_HOURS + 1, False),
    ("", "session", services.MIN_REMEMBER_HOURS, True),
    ("", "session", services.MIN_REMEMBER_HOURS / 2, False),
    ("", "always", 0, False),
    ("", "always", -5, False),
]
FORM_ACTIONS = {"once": "once", "session": "session", "always": "always"}


def through_form(user: Any, found: PermissionRequest, message: str, remember: str, hours: float | None) -> bool:
    client = Client()
    client.force_login(user)
    data: dict[str, Any] = {"action": FORM_ACTIONS[remember], "message": message}
    if hours is not None:
        data["hours"] = hours
    response = client.post(f"/requests/{found.pk}/decide", data, HTTP_ACCEPT="application/json")
    assert response.status_code in (200, 400), response.content[:200]
    return response.status_code == 200


def through_api(user: Any, found: PermissionRequest, message: str, remember: str, hours: float | None) -> bool:
    client = APIClient()
    client.force_authenticate(user)
    body = {"behavior": "allow", "message": message, "remember": remember, "remember_hours": hours}
    response = client.post(f"/api/v1/permission-requests/{found.pk}/decision", body, format="json")
    assert response.status_code in (200, 400), response.content[:200]
    return response.status_code == 200


def through_service(user: Any, found: PermissionRequest, message: str, remember: str, hours: float | None) -> bool:
    try:
        services.request_decide(
            found.pk,
            services.Answer(
                behavior="allow",
                surface="telegram",
                user=user,
                message=message,
                remember=remember,
                remember_hours=hours,
            ),
        )
    except services.ServiceError:
        return False
    return True


@pytest.mark.django_db
@pytest.mark.parametrize("door", [through_form, through_api, through_service], ids=["form", "api", "service"])
@pytest.mark.parametrize(("message", "remember", "hours", "taken"), ANSWERS)
def test_every_door_takes_and_refuses_the_same_answers(
    door: Any, message: str, remember: str, hours: float | None, taken: bool, alice: Any, pending: Any
) -> None:
    found = pending(tool_input={"command": "npm run test"})  # a call a grant may cover
    assert door(alice, found, message, remember, hours) is taken
    found.refresh_from_db()
    assert found.state == (RequestState.DECIDED if taken else RequestState.PENDING)


def through_batch_form(user: Any, found: PermissionRequest, message: str) -> bool:
    client = Client()
    client.force_login(user)
    data = {"ids": [str(found.pk)], "action": "once", "message": message}
    response = client.post("/requests/decide-batch", data, HTTP_ACCEPT="application/json")
    assert response.status_code in (200, 400), response.content[:200]
    return response.status_code == 200


def through_batch_api(user: Any, found: PermissionRequest, message: str) -> bool:
    client = APIClient()
    client.force_authenticate(user)
    body = {"ids": [str(found.pk)], "behavior": "allow", "message": message}
    response = client.post("/api/v1/permission-requests/decisions", body, format="json")
    assert response.status_code in (200, 400), response.content[:200]
    return response.status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("door", [through_batch_form, through_batch_api], ids=["batch-form", "batch-api"])
@pytest.mark.parametrize(("message", "taken"), [(LONGEST, True), (LONGEST + "m", False)])
def test_a_batch_takes_and_refuses_the_same_messages(
    door: Any, message: str, taken: bool, alice: Any, pending: Any
) -> None:
    found = pending(tool_input={"command": "npm run test"})
    assert door(alice, found, message) is taken
    found.refresh_from_db()
    assert found.state == (RequestState.DECIDED if taken else RequestState.PENDING)
