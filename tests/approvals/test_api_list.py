"""The request list people (and phone apps) use to find work: their teams, newest first."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory

from approvals import services
from approvals.api.errors import server_error

URL = "/api/v1/permission-requests"


@pytest.mark.django_db
class RequestListTests:
    def test_it_lists_newest_first_and_filters(self, api_as: Any, bob: Any, ci_bot: Any, pending: Any) -> None:
        first = pending(session_id="s-a")
        second = pending(session_id="s-b")
        decided = pending(session_id="s-b")
        services.request_cancel(request=decided)
        api = api_as(bob)
        assert [r["id"] for r in api.get(URL).json()["results"]] == [str(decided.pk), str(second.pk), str(first.pk)]
        assert [r["id"] for r in api.get(f"{URL}?state=pending").json()["results"]] == [str(second.pk), str(first.pk)]
        assert [r["id"] for r in api.get(f"{URL}?session=s-a").json()["results"]] == [str(first.pk)]
        assert api.get(f"{URL}?agent=ci-bot").json()["results"]
        assert api.get(f"{URL}?agent=other-bot").json()["results"] == []
        cancelled = api.get(f"{URL}?state=cancelled").json()["results"]
        assert cancelled[0]["decision"]["reason"]["type"] == "cancelled"

    def test_it_hides_other_teams_requests(self, api_as: Any, mallory: Any, admin: Any, pending: Any) -> None:
        pending()
        assert api_as(mallory).get(URL).json()["results"] == []
        assert len(api_as(admin).get(URL).json()["results"]) == 1

    def test_it_pages_with_a_cursor(self, api_as: Any, alice: Any, pending: Any) -> None:
        made = [str(pending().pk) for _ in range(5)]
        api = api_as(alice)
        page = api.get(f"{URL}?page_size=2").json()
        seen = [r["id"] for r in page["results"]]
        while page["next"]:
            page = api.get(page["next"].replace("http://testserver", "")).json()
            seen += [r["id"] for r in page["results"]]
        assert seen == made[::-1]


class ServerErrorTests:
    def test_it_answers_json_for_api_paths_and_html_elsewhere(self) -> None:
        api = server_error(RequestFactory().get("/api/v1/rules"))
        assert api.status_code == 500
        assert api["Content-Type"] == "application/json"
        assert b"server log" in api.content
        page = server_error(RequestFactory().get("/rules/"))
        assert page.status_code == 500
        assert page["Content-Type"].startswith("text/html")


@pytest.mark.django_db
class PayloadConsistencyTests:
    def test_it_never_pairs_a_decision_with_a_pending_status(self, ci_bot: Any, pending: Any) -> None:
        from approvals import selectors
        from approvals.models import PermissionRequest

        request = pending()
        stale = PermissionRequest.objects.get(pk=request.pk)  # read before the cancel commits
        result = services.request_cancel(request=request)
        payload = selectors.request_payload(stale, result.decision)
        assert payload["status"] == "cancelled"
