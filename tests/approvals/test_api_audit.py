"""The audit API: team-scoped, filtered, cursor-paginated, exported as CSV and JSON lines."""

from __future__ import annotations

import csv
import io
import json
from typing import Any
from urllib.parse import urlencode

import pytest

from approvals import services
from tests.approvals.conftest import ASK_CALL

URL = "/api/v1/audit"


def engine_decision(agent: Any, tool_use_id: str, **call: Any) -> Any:
    """A call the engine denies at once: TaskList takes no input."""
    call = {"tool_name": "TaskList", "tool_input": {"n": 1}, "tool_use_id": tool_use_id, **call}
    result = services.request_submit(agent=agent, call=call)
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
        assert rows[0]["reason"] == {"type": "other", "detail": "validation"}
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
        services.request_decide(request.pk, services.Answer(behavior="allow", surface="api", user=alice))
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
        assert json.loads(rows[0]["reason"]) == {"type": "other", "detail": "validation"}

    def test_it_defuses_formulas_in_csv_cells(self, api_as: Any, alice: Any, ci_bot: Any, pending: Any) -> None:
        for prefix in ("=", "+", "-", "@"):
            request = pending(session_id=f'{prefix}HYPERLINK("http://evil")')
            services.request_decide(
                request.pk,
                services.Answer(behavior="deny", surface="api", user=alice, message=f"{prefix}cmd|' /C calc'!A0"),
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
            call = {**ASK_CALL, "tool_name": "TaskList", "tool_use_id": f"b{index}"}  # denied: TaskList takes no input
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
        services.request_decide(asked.pk, services.Answer(behavior="deny", surface="api", user=alice, message="-no"))
        api = api_as(alice)
        expected = [[csv_cell(row[column]) for column in CSV_COLUMNS] for row in api.get(URL).json()["results"]]
        text = streamed(api.get(f"{URL}?format=csv"))
        header, *rows = csv.reader(io.StringIO(text))
        assert header == CSV_COLUMNS
        assert rows == expected
        assert len(rows) == 3 and rows[0][CSV_COLUMNS.index("created_at")].endswith("Z")


# (key, tool, input) of rows a deny rule records at once, and what each search must find.
SEARCH_ROWS = [
    ("publish", "Bash", {"command": "npm publish --tag next"}),
    ("percent", "Bash", {"command": "echo 100% done"}),
    ("underscore", "Bash", {"command": "ls my_dir"}),
    ("backslash", "Bash", {"command": "printf 'a\\nb'"}),
    ("emoji", "Bash", {"command": "echo 🙂 shipped"}),
    ("read", "Read", {"file_path": "/etc/hosts"}),
    ("fetch", "WebFetch", {"url": "https://Example.ORG/Docs", "prompt": "summarise"}),
]
RULE_DENIED = {key for key, _, _ in SEARCH_ROWS}
SEARCHES = [
    ("npm publish", {"publish"}),
    ("NPM PUBLISH", {"publish"}),
    ("Npm Pub", {"publish"}),
    ("100%", {"percent"}),
    ("%", {"percent"}),
    ("_", {"underscore"}),
    ("y_d", {"underscore"}),
    ("\\n", {"backslash"}),
    ("'a", {"backslash"}),
    ("🙂", {"emoji"}),
    ("/ETC/HOSTS", {"read"}),
    ("example.org/docs", {"fetch"}),
    ("EXAMPLE.ORG", {"fetch"}),
    ("ÜNÏCODE", {"person"}),
    ("ünïcode", {"person"}),
    ("STRASSE", {"person"}),
    ("straße", {"person"}),
    ("make deploy", {"person"}),
    ("denied by the rule", RULE_DENIED),
    ("zzz-nothing", set()),
    ("a" * 200, set()),
]


def search_url(params: dict[str, str]) -> str:
    return f"{URL}?{urlencode(params)}"


@pytest.fixture
def searchable(ci_bot: Any, alice: Any, default_team: Any, pending: Any) -> dict[int, str]:
    """Audit rows of every kind of call and a person's deny message; their ids by key."""
    request = pending(tool_input={"command": "make deploy --prod"})
    for tool in ("Bash", "Read", "WebFetch"):
        services.rule_create(rule=tool, behavior="deny", source="policySettings", team=default_team)
    ids: dict[int, str] = {}
    for n, (key, tool, tool_input) in enumerate(SEARCH_ROWS):
        call = {"tool_name": tool, "tool_input": tool_input, "tool_use_id": f"s{n}", "cwd": "/tmp/proj"}
        result = services.request_submit(agent=ci_bot.agent, call=call)
        assert result.decision is not None
        ids[result.decision.pk] = key
    decided = services.request_decide(
        request.pk, services.Answer(behavior="deny", surface="web", user=alice, message="Not from CI: Straße Ünïcode")
    )
    assert decided.decision is not None
    ids[decided.decision.pk] = "person"
    return ids


@pytest.mark.django_db
class AuditSearchTests:
    """`?q=` finds the same rows on SQLite and PostgreSQL (run this file on both)."""

    @pytest.mark.parametrize(("query", "expected"), SEARCHES, ids=[f"q{n}" for n in range(len(SEARCHES))])
    def test_it_finds_a_case_insensitive_substring_of_commands_targets_and_messages(
        self, api_as: Any, alice: Any, searchable: dict[int, str], query: str, expected: set[str]
    ) -> None:
        response = api_as(alice).get(search_url({"q": query}))
        assert response.status_code == 200, response.content
        found = {searchable[row["id"]] for row in response.json()["results"]}
        assert found == expected

    def test_it_searches_within_the_other_filters_and_the_exports(
        self, api_as: Any, alice: Any, searchable: dict[int, str]
    ) -> None:
        api = api_as(alice)
        rows = api.get(search_url({"q": "ECHO", "tool": "Bash"})).json()["results"]
        assert {searchable[row["id"]] for row in rows} == {"percent", "emoji"}
        lines = streamed(api.get(search_url({"q": "npm publish", "format": "jsonl"}))).splitlines()
        assert [json.loads(line)["tool_input"]["command"] for line in lines] == ["npm publish --tag next"]

    def test_it_finds_nothing_of_another_team(self, api_as: Any, mallory: Any, searchable: dict[int, str]) -> None:
        assert api_as(mallory).get(search_url({"q": "npm"})).json()["results"] == []

    @pytest.mark.parametrize("query", ["a" * 201, "nul\x00byte"])
    def test_it_refuses_a_query_it_cannot_run(self, api_as: Any, alice: Any, query: str) -> None:
        response = api_as(alice).get(search_url({"q": query}))
        assert response.status_code == 400

    # SQLite scans the search table; make test's PostgreSQL pass runs this one.
    @pytest.mark.postgresql
    def test_it_has_a_trigram_index_on_postgresql(self) -> None:
        from django.db import connection

        assert connection.vendor == "postgresql", "run with DATABASE_URL=postgres://… (marker: postgresql)"
        with connection.cursor() as cursor:
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'audit_search_trgm'")
            row = cursor.fetchone()
        assert row is not None and "gin_trgm_ops" in row[0]
