"""Every page shows the same frame: the person's standing and the queue's count in the nav.

Pages rendered outside `approvals.pages.render_page` once showed every superuser, admin and
approver as a "viewer" and left the nav's pending count out.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from approvals import services

pytestmark = pytest.mark.django_db

PAGES = ["/", "/audit/", "/denials/", "/rules/", "/agents/", "/profile/", "/notifications/"]
ADMIN_PAGES = ["/people/", "/teams/default/settings/"]
VIEWER_TAG = '<span class="tag">viewer</span>'


def page(user: Any, path: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return response.content.decode()


@pytest.mark.parametrize(
    ("persona", "path"),
    [(persona, path) for persona in ("admin", "carol") for path in PAGES + ADMIN_PAGES]
    + [("alice", path) for path in PAGES],
)
def test_no_approver_is_shown_as_a_viewer(persona: str, path: str, request: pytest.FixtureRequest) -> None:
    user = request.getfixturevalue(persona)
    assert VIEWER_TAG not in page(user, path)


@pytest.mark.parametrize("path", PAGES)
def test_a_viewer_is_shown_as_one(path: str, bob: Any) -> None:
    assert VIEWER_TAG in page(bob, path)


@pytest.mark.parametrize("path", PAGES + ADMIN_PAGES)
def test_every_page_counts_the_pending_requests(path: str, carol: Any, ci_bot: Any) -> None:
    call = {"tool_name": "Bash", "tool_input": {"command": "npm publish"}, "session_id": "s1", "cwd": "/srv/p"}
    assert services.request_submit(agent=ci_bot.agent, call=call).decision is None
    assert 'id="nav-count" data-count="1"' in page(carol, path)
