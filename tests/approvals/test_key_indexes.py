"""A foreign key that leads a unique constraint has no index of its own (migrations
approvals 0029, relay 0005): a plan PostgreSQL keeps could take that index for a lookup the
unique one answers in one step, and read every row of the key instead."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.db import connection, models

GATEHOUSE_APPS = ("approvals", "relay")


def _unique_leaders(meta: Any) -> set[str]:
    """The fields that lead a unique constraint of more than one field, on every row."""
    uniques = [
        list(constraint.fields)
        for constraint in meta.constraints
        if isinstance(constraint, models.UniqueConstraint) and constraint.condition is None
    ]
    uniques += [list(fields) for fields in meta.unique_together]
    return {fields[0] for fields in uniques if len(fields) > 1}


def _models() -> list[type[models.Model]]:
    return [model for name in GATEHOUSE_APPS for model in apps.get_app_config(name).get_models()]


def test_no_model_indexes_a_key_its_unique_constraint_leads_with() -> None:
    doubled = [
        f"{model._meta.label}.{field.name}"
        for model in _models()
        for field in model._meta.local_concrete_fields
        if isinstance(field, models.ForeignKey)
        and field.db_index  # type: ignore[attr-defined]  # not in django-stubs
        and not field.unique
        and field.name in _unique_leaders(model._meta)
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
            leaders = {meta.get_field(name).column for name in _unique_leaders(meta)}  # type: ignore[union-attr]
            for name, found in connection.introspection.get_constraints(cursor, meta.db_table).items():
                alone = found["index"] and not found["unique"] and len(found["columns"]) == 1
                if alone and name not in declared and found["columns"][0] in leaders:
                    doubled.append(f"{meta.db_table}.{name}")
    assert doubled == []
