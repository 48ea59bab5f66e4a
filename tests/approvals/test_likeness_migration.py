"""The upgrade that stores each request's likeness works it out for the rows already there.

Runs the real migrations: calls made on today's schema, back to 0027 (no `likeness`
column), forward again. The rows a card can compare with (people's allows, pending asks)
get what `changes.likeness_hash` says; a card then finds the allow made before the upgrade.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from approvals import changes, selectors, services
from approvals.models import PermissionRequest

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("approvals", "0027_fence_held_function")


def submit(agent: Any, command: str) -> Any:
    call = {"tool_name": "Bash", "tool_input": {"command": command}, "cwd": "/tmp/proj"}
    return services.request_submit(agent=agent, call=call)


class LikenessUpgradeTests:
    def test_rows_a_card_compares_with_get_their_likeness_and_the_card_finds_them(
        self, alice: Any, ci_bot: Any, default_team: Any
    ) -> None:
        allowed = submit(ci_bot.agent, "pytest -q tests/old").request
        services.request_decide(allowed.pk, services.Answer(behavior="allow", surface="web", user=alice))
        denied = submit(ci_bot.agent, "pytest -q tests/denied").request
        services.request_decide(denied.pk, services.Answer(behavior="deny", surface="web", user=alice))
        waiting = submit(ci_bot.agent, "npm test").request
        services.rule_create(rule="Bash(git log:*)", behavior="allow", source="projectSettings", team=default_team)
        by_rule = submit(ci_bot.agent, "git log -1")
        assert by_rule.decision is not None and by_rule.decision.behavior == "allow"

        executor = MigrationExecutor(connection)
        newest = executor.loader.graph.leaf_nodes()
        try:
            executor.migrate([BEFORE])
        finally:
            executor = MigrationExecutor(connection)
            executor.loader.build_graph()
            executor.migrate(newest)

        likeness = dict(PermissionRequest.objects.values_list("pk", "likeness"))
        assert likeness[allowed.pk] == changes.likeness_hash("Bash", {"command": "pytest -q tests/old"})
        assert likeness[waiting.pk] == changes.likeness_hash("Bash", {"command": "npm test"})
        # Never read for it: a call a person denied, a call a rule allowed.
        assert likeness[denied.pk] == "" == likeness[by_rule.request.pk]
        # The card of an ask made after the upgrade names the allow made before it.
        found = selectors.last_allowed_like(submit(ci_bot.agent, "pytest -x").request)
        assert found is not None and found.request_id == allowed.pk

    def test_a_server_of_the_version_before_still_writes_its_rows(self, ci_bot: Any) -> None:
        # While the upgrade is applied, the servers still running write rows without the
        # column: the database fills it in (empty, as for any row no card compares with).
        model = PermissionRequest._meta
        written = submit(ci_bot.agent, "npm test").request
        old_columns = [f.column for f in model.concrete_fields if f.name != "likeness"]
        chosen = {"id": "%s", "tool_use_id": "%s"}
        select = ", ".join(chosen.get(c, connection.ops.quote_name(c)) for c in old_columns)
        names = ", ".join(connection.ops.quote_name(c) for c in old_columns)
        copy = uuid.uuid4()
        ids = [model.pk.get_db_prep_value(value, connection) for value in (copy, written.pk)]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {model.db_table} ({names}) SELECT {select} FROM {model.db_table} WHERE id = %s",  # noqa: S608
                [ids[0], "old-server", ids[1]],
            )
        assert PermissionRequest.objects.get(pk=copy).likeness == ""
