"""SQLite's FTS5 trigram index of the audit search (migration 0023, approvals.audit_search).

A search of 3 or more characters reads the FTS table, a shorter one scans the search
table, and both find exactly what the folded substring `LIKE` finds. PostgreSQL has its
own trigram index (test_api_audit.py::AuditSearchTests runs the shared cases on both).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from approvals import services
from approvals.audit_search import FTS_MATCH, FTS_TABLE, fold, fts_phrase
from approvals.models import AuditSearch
from approvals.selectors.audit import audit_rows

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def sqlite_only() -> None:
    # Not a db_engine suite: `make test` runs it on SQLite only (PostgreSQL has pg_trgm).
    assert connection.vendor == "sqlite", "the FTS5 table is SQLite's; run this file on SQLite"
    assert sqlite3.sqlite_version_info >= (3, 34), "this SQLite has no FTS5 trigram tokenizer"


def fts_hits(folded: str) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(FTS_MATCH, [fts_phrase(folded)])
        return {row[0] for row in cursor.fetchall()}


def like_hits(folded: str) -> set[int]:
    return set(AuditSearch.objects.filter(text__contains=folded).values_list("decision_id", flat=True))


def plan(query: str, user: Any) -> str:
    sql, params = audit_rows({"q": query}, user).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


def search(user: Any, query: str) -> set[int]:
    return set(audit_rows({"q": query}, user).values_list("id", flat=True))


# Case pairs that fold to more or other letters (ß, ẞ, İ, ς, ǅ, ﬃ), combining marks,
# astral characters, FTS5 query syntax and LIKE wildcards, blanks of every kind.
TRICKY = list("aAbBzZ019 \n\t\"'%_\\*-:().^$+,{}[]ßẞİ\u0131Σ\u03c3ςǅǆﬃ\u212aé\u0301🙂漢字ÅΩ")
TEXT = st.text(st.one_of(st.sampled_from(TRICKY), st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"])))
CASES = st.sampled_from([str, str.upper, str.lower, str.swapcase, str.title])


class FtsSameHitsAsLikeTests:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(texts=st.lists(TEXT.filter(lambda text: len(text) <= 40), min_size=1, max_size=6), data=st.data())
    def test_the_trigram_table_finds_exactly_the_rows_like_finds(self, texts: list[str], data: Any) -> None:
        source = data.draw(st.sampled_from(texts))
        start = data.draw(st.integers(0, len(source)))
        length = data.draw(st.integers(3, 8))
        query = data.draw(st.one_of(st.just(source[start : start + length]), TEXT.filter(lambda q: len(q) <= 8)))
        folded = fold(data.draw(CASES)(query))
        assume(len(folded) >= 3)
        with transaction.atomic():
            for number, text in enumerate(texts, start=1):
                AuditSearch.objects.create(decision_id=number, text=fold(text))
            truth = {number for number, text in enumerate(texts, start=1) if folded in fold(text)}
            assert fts_hits(folded) == like_hits(folded) == truth
            transaction.set_rollback(True)

    @pytest.mark.parametrize(
        ("query", "found"),
        [
            ("npm", {1}),  # three characters: the shortest the trigram table serves
            ("NPM", {1}),
            ("m p", {1}),
            ("h\nn", {1}),  # a newline between two parts of the text
            ('"b"', {2}),  # FTS5 phrase quotes are literal
            ('a"b', {2}),
            (" OR ", {3}),  # nor are FTS5 operators
            ("x OR y", {3}),
            ("f *", {4}),
            ("%_d", {5}),  # nor LIKE's wildcards
            ("SSE", {6}),  # Straße folds to strasse
            ("ẞE", {6}),
            ("🙂漢字", {7}),
            ("漢字!", {7}),
            ("i̇st", {8}),  # İ folds to i and a combining dot
            ("ist", set()),
            ("nothing", set()),
        ],
    )
    def test_it_finds_these_through_the_trigram_table(self, query: str, found: set[int]) -> None:
        texts = [
            "npm publish\nnext",
            'say a"b"c',
            "x OR y",
            "rm -rf *",
            "100%_done",
            "Straße 5",
            "🙂漢字!",
            "İstanbul",
        ]
        for number, text in enumerate(texts, start=1):
            AuditSearch.objects.create(decision_id=number, text=fold(text))
        folded = fold(query)
        assert fts_hits(folded) == like_hits(folded) == found


class FtsUsedTests:
    def test_a_search_of_3_or_more_characters_reads_the_trigram_table(self, alice: Any) -> None:
        three = plan("npm", alice)
        assert FTS_TABLE in three and "VIRTUAL TABLE" in three, three
        assert "approvals_auditsearch " not in three + " ", "no scan of the search table"
        two = plan("np", alice)  # a trigram needs 3 characters: the plain scan
        assert FTS_TABLE not in two and "approvals_auditsearch" in two, two

    def test_the_table_follows_each_write_the_archive_delete_and_a_rebuilt_text(
        self, alice: Any, ci_bot: Any, default_team: Any
    ) -> None:
        services.rule_create(rule="Bash", behavior="deny", source="policySettings", team=default_team)
        ids = []
        for n, command in enumerate(["npm publish", "npm test", "make deploy"]):
            call = {"tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": f"f{n}"}
            decision = services.request_submit(agent=ci_bot.agent, call=call).decision
            assert decision is not None
            ids.append(decision.pk)
        assert search(alice, "NPM") == {ids[0], ids[1]}
        with connection.cursor() as cursor:  # what the archive runs, and a text rebuilt
            cursor.execute("DELETE FROM approvals_auditsearch WHERE decision_id = %s", [ids[0]])
            cursor.execute("UPDATE approvals_auditsearch SET text = 'npm ci' WHERE decision_id = %s", [ids[2]])
        assert search(alice, "npm") == {ids[1], ids[2]}
        assert search(alice, "deploy") == set()
        assert fts_hits("npm") == like_hits("npm") == {ids[1], ids[2]}

    def test_without_the_table_a_search_scans_with_the_same_hits(
        self, alice: Any, ci_bot: Any, default_team: Any
    ) -> None:
        """A SQLite without FTS5 trigram (before 3.34) never has the table: searches still work."""
        services.rule_create(rule="Bash", behavior="deny", source="policySettings", team=default_team)
        call = {"tool_name": "Bash", "tool_input": {"command": "npm publish"}, "tool_use_id": "g1"}
        decision = services.request_submit(agent=ci_bot.agent, call=call).decision
        assert decision is not None
        with connection.cursor() as cursor:  # undone with the test's transaction
            for kind in ("insert", "delete", "update"):
                cursor.execute(f"DROP TRIGGER {FTS_TABLE}_{kind}")
            cursor.execute(f"DROP TABLE {FTS_TABLE}")
        assert FTS_TABLE not in plan("publish", alice)
        assert search(alice, "PUBLISH") == {decision.pk}
