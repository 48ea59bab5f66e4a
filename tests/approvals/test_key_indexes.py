"""No index the database keeps up for nothing: every decision's audit row and request
pays for each index of its table, on every insert.

- A foreign key that leads another index of its table, unique or not (migrations
  approvals 0029 and 0030, relay 0005), has no index of its own: the other one finds its
  rows, and a plan PostgreSQL keeps could take the key's own for a lookup the unique one
  answers in one step, and read every row of the key instead.
- No text column has PostgreSQL's second, pattern-matching index (`varchar_pattern_ops`),
  which Django makes beside each unique or indexed one: no query here matches a prefix
  (`gatehouse.postgresql`'s schema editor makes none; migration approvals 0030 and relay
  0006 dropped the old ones).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.db import connection, models

GATEHOUSE_APPS = ("approvals", "relay")


def _leaders(meta: Any) -> set[str]:
    """The fields that lead an index of more than one field that covers every row: a
    unique constraint's, a `unique_together`'s, a declared index's."""
    covering = [
        list(constraint.fields)
        for constraint in meta.constraints
        if isinstance(constraint, models.UniqueConstraint) and constraint.condition is None and constraint.fields
    ]
    covering += [list(fields) for fields in meta.unique_together]
    covering += [list(index.fields) for index in meta.indexes if index.condition is None and index.fields]
    return {fields[0].lstrip("-") for fields in covering if len(fields) > 1}


def _models() -> list[type[models.Model]]:
    return [model for name in GATEHOUSE_APPS for model in apps.get_app_config(name).get_models()]


def test_no_model_indexes_a_key_another_index_leads_with() -> None:
    doubled = [
        f"{model._meta.label}.{field.name}"
        for model in _models()
        for field in model._meta.local_concrete_fields
        if isinstance(field, models.ForeignKey)
        and field.db_index  # type: ignore[attr-defined]  # not in django-stubs
        and not field.unique
        and field.name in _leaders(model._meta)
    ]
    assert doubled == []


@pytest.mark.django_db
def test_the_database_has_no_such_index() -> None:
    """The migrations dropped them: an index on the key alone, other than one a model
    declares (a partial index of pending requests, say), is the key's own."""
    doubled = []
    with connection.cursor() as cursor:
        for model in _models():
            meta = model._meta
            declared = {index.name for index in meta.indexes}
            leaders = {meta.get_field(name).column for name in _leaders(meta)}  # type: ignore[union-attr]
            for name, found in connection.introspection.get_constraints(cursor, meta.db_table).items():
                alone = found["index"] and not found["unique"] and len(found["columns"]) == 1
                if alone and name not in declared and found["columns"][0] in leaders:
                    doubled.append(f"{meta.db_table}.{name}")
    assert doubled == []


@pytest.mark.postgresql
@pytest.mark.django_db
def test_no_table_has_a_pattern_matching_index() -> None:
    """Not ours, nor Django's own tables' made by this backend."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, indexname FROM pg_indexes WHERE schemaname = current_schema()"
            " AND indexdef ~ '(varchar|text|bpchar)_pattern_ops'"
        )
        found = cursor.fetchall()
    assert found == []
