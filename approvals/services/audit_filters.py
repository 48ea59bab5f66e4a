"""A person's saved audit filters: named queries of the audit page."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from approvals.models import SavedAuditFilter
from approvals.services.outcomes import ServiceError

MAX_SAVED_FILTERS = 50


def audit_filter_save(*, user: Any, name: str, query: str) -> SavedAuditFilter:
    """Save `query` (the audit form's own query string) under `name`; the same name replaces it.

    - Call with a query the audit filter form has validated and written back.
    """
    name = name.strip()
    if not name:
        raise ServiceError("Give the filter a name.")
    if not query:
        raise ServiceError("There is no filter to save: search or filter first.")
    with transaction.atomic():
        saved = SavedAuditFilter.objects.filter(user=user, name=name).first()
        if saved is None:
            if SavedAuditFilter.objects.filter(user=user).count() >= MAX_SAVED_FILTERS:
                raise ServiceError(f"You have {MAX_SAVED_FILTERS} saved filters; delete one first.")
            return SavedAuditFilter.objects.create(user=user, name=name, query=query)
        SavedAuditFilter.objects.filter(pk=saved.pk).update(query=query)
        saved.query = query
        return saved


def audit_filter_delete(*, user: Any, filter_id: int) -> bool:
    """Delete one of `user`'s saved filters; False if it is not theirs or not there."""
    deleted, _ = SavedAuditFilter.objects.filter(user=user, pk=filter_id).delete()
    return deleted > 0
