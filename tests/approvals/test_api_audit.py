"""The audit API: team-scoped, filtered, cursor-paginated, exported as CSV and JSON lines."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

from approvals import services
from tests.approvals.conftest import ASK_CALL

URL = "/api/v1/audit"


def engine_decision(agent: Any, tool_use_id: str, **call: Any) -> Any:
    result = services.request_submit(agent=agent, call={"tool_name": "Teleport", "tool_use_id": tool_use_id, **call})
    assert result.decision is not None
    return result.decision


def streamed(response: Any) -> str:
    assert response.streaming
    return b"".join(response).decode()


@pytest.mark.django_db
class AuditListTests:
    def test_it_lists_newest_first_with_the_full_reason(self, api_as: Any, alice: Any, ci_bot: Any) -> None:
        first = engine_decision(ci_bot.agent, "a1")
        second = engine_decision(ci_bot.agent, "a2")
        rows = api_as(alice).get(URL).json()["results"]
        assert [row["id"] for row in rows] == [second.pk, first.pk]
        assert rows[0]["reason"] == {"type": "other", "detail": "unknownTool"}
        assert rows[0]["agent"] == "ci-bot"
        assert rows[0]["hash"] == second.hash

    def test_it_shows_only_the_callers_teams(self, api_as: Any, mallory: Any, ci_bot: Any, other_bot: Any) -> None:
        engine_decision(ci_bot.agent, "mine")
        theirs = engine_decision(other_bot.agent, "theirs")
        rows = api_as(mallory).get(URL).json()["results"]
        assert [row["id"] for row in rows] == [theirs.pk]

    def test_it_filters_by_every_documented_field(
        self, api_as: Any, alice: Any, ci_bot: Any, default_team: Any, pending: Any
    ) -> None:
        engine_decision(ci_bot.agent, "f1", session_id="s-a")
        request = pending(session_id="s-b")
        services.request_decide(request_id=request.pk, behavior="allow", surface="api", user=alice)
        api = api_as(alice)

        def ids(query: str) -> int:
            response = api.get(f"{URL}?{query}")
            assert response.status_code == 200, response.content
            return len(response.json()["results"])

        assert ids("session=s-a") == 1
        assert ids("tool=Bash") == 1
        assert ids("behavior=allow") == 1
        assert ids("behavior=deny") == 1
        assert ids("reason_type=user") == 1
        assert ids("decided_by=alice") == 1
        assert ids("surface=engine") == 1
        assert ids("agent=ci-bot") == 2
        assert ids("agent=nobody") == 0
        assert ids("since=2000-01-01T00:00:00Z") == 2
        assert ids("until=2000-01-01T00:00:00Z") == 0

    def test_it_filters_by_rule(self, api_as: Any, alice: Any, ci_bot: Any, default_team: Any) -> None:
        services.rule_create(rule="Bash(ls)", behavior="deny", source="policySettings", team=default_team)
        services.request_submit(agent=ci_bot.agent, call={"tool_name": "Bash", "tool_input": {"command": "ls"}})
        rows = api_as(alice).get(f"{URL}?rule=Bash(ls)").json()["results"]
        assert len(rows) == 1
        assert rows[0]["rule_source"] == "policySettings"

    def test_it_reads_a_page_in_the_same_few_queries_however_many_rows(
        self, api_as: Any, alice: Any, ci_bot: Any
    ) -> None:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        api = api_as(alice)
        api.get(URL)  # the token's first use writes once
        counts = []
        for batch in range(2):
            for index in range(3 * (batch + 1)):
                engine_decision(ci_bot.agent, f"q{batch}-{index}")
            with CaptureQueriesContext(connection) as captured:
                assert api.get(URL).status_code == 200
            counts.append(len(captured.captured_queries))
        # A column read lazily per row (a deferred field, a relation) would add a query per row.
        assert counts[0] == counts[1]

    def test_it_pages_with_a_cursor_without_repeats_or_gaps(self, api_as: Any, alice: Any, ci_bot: Any) -> None:
        made = [engine_decision(ci_bot.agent, f"p{index}").pk for index in range(7)]
        api = api_as(alice)
        seen: list[int] = []
        page = api.get(f"{URL}?page_size=3").json()
        while True:
            seen += [row["id"] for row in page["results"]]
            if not page["next"]:
                break
            # A row decided while paging must not shift the pages already handed out.
            engine_decision(ci_bot.agent, f"late{len(seen)}")
            page = api.get(page["next"].replace("http://testserver", "")).json()
        assert seen == sorted(made, reverse=True)


@pytest.mark.django_db
class AuditExportTests:
    def test_it_exports_csv_with_a_header_and_every_row(self, api_as: Any, alice: Any, ci_bot: Any) -> None:
        for index in range(3):
            engine_decision(ci_bot.agent, f"c{index}")
        response = api_as(alice).get(f"{URL}?format=csv")
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/csv")
        assert "attachment" in response["Content-Disposition"]
        rows = list(csv.DictReader(io.StringIO(streamed(response))))
        assert len(rows) == 3
        assert rows[0]["reason_type"] == "other"
        assert json.loads(rows[0]["reason"]) == {"type": "other", "detail": "unknownTool"}

    def test_it_defuses_formulas_in_csv_cells(self, api_as: Any, alice: Any, ci_bot: Any, pending: Any) -> None:
        for prefix in ("=", "+", "-", "@"):
            request = pending(session_id=f'{prefix}HYPERLINK("http://evil")')
            services.request_decide(
                request_id=request.pk, behavior="deny", surface="api", user=alice, message=f"{prefix}cmd|' /C calc'!A0"
            )
        text = streamed(api_as(alice).get(f"{URL}?format=csv"))
        rows = list(csv.DictReader(io.StringIO(text)))
        assert len(rows) == 4
        for row in rows:
            assert row["session_id"].startswith("'")
            assert row["message"].startswith("'")
            assert row["session_id"][1] in "=+-@"

    def test_it_exports_json_lines_that_match_the_json_rows(self, api_as: Any, alice: Any, ci_bot: Any) -> None:
        for index in range(3):
            engine_decision(ci_bot.agent, f"j{index}", tool_input={"n": index})
        api = api_as(alice)
        response = api.get(f"{URL}?format=jsonl&agent=ci-bot")
        assert response["Content-Type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in streamed(response).splitlines()]
        assert lines == api.get(URL).json()["results"]
        assert [line["tool_input"] for line in lines] == [{"n": 2}, {"n": 1}, {"n": 0}]

    def test_it_exports_more_rows_than_one_batch(
        self, api_as: Any, alice: Any, ci_bot: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from approvals.api import audit

        # A small batch, so a few rows cross two batch boundaries and end in a partial one.
        monkeypatch.setattr(audit, "EXPORT_BATCH", 4)
        count = 2 * audit.EXPORT_BATCH + 1
        for index in range(count):
            call = {**ASK_CALL, "tool_name": "Nope", "tool_use_id": f"b{index}"}
            services.request_submit(agent=ci_bot.agent, call=call)
        api = api_as(alice)
        lines = streamed(api.get(f"{URL}?format=jsonl")).splitlines()
        assert len(lines) == count
        assert len({json.loads(line)["id"] for line in lines}) == count
        rows = list(csv.DictReader(io.StringIO(streamed(api.get(f"{URL}?format=csv&agent=ci-bot")))))
        assert [int(row["id"]) for row in rows] == [json.loads(line)["id"] for line in lines]

    def test_it_exports_csv_cells_as_the_json_rows_show_them(
        self, api_as: Any, alice: Any, ci_bot: Any, default_team: Any, pending: Any
    ) -> None:
        from approvals.api.audit import CSV_COLUMNS, csv_cell

        services.rule_create(rule="Bash(ls)", behavior="deny", source="policySettings", team=default_team)
        services.request_submit(agent=ci_bot.agent, call={"tool_name": "Bash", "tool_input": {"command": "ls"}})
        engine_decision(ci_bot.agent, "e1", tool_input={"nested": {"b": [1, 2.5, None], "a": "é"}})
        asked = pending(session_id="=SUM(1)")
        services.request_decide(request_id=asked.pk, behavior="deny", surface="api", user=alice, message="-no")
        api = api_as(alice)
        expected = [[csv_cell(row[column]) for column in CSV_COLUMNS] for row in api.get(URL).json()["results"]]
        text = streamed(api.get(f"{URL}?format=csv"))
        header, *rows = csv.reader(io.StringIO(text))
        assert header == CSV_COLUMNS
        assert rows == expected
        assert len(rows) == 3 and rows[0][CSV_COLUMNS.index("created_at")].endswith("Z")
