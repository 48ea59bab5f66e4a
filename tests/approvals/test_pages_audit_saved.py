"""Saved audit filters: a person names the current search and filters and gets them back in one click."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from approvals import services
from approvals.models import SavedAuditFilter


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def save(client: Client, name: str, query: str) -> Any:
    return client.post("/audit/filters/", {"name": name, "query": query}, follow=True)


@pytest.mark.django_db
class SavedFilterTests:
    def test_it_saves_the_search_and_filters_and_lists_them_as_links(self, alice: Any) -> None:
        client = client_for(alice)
        page = client.get("/audit/?q=git+push&behavior=deny").content.decode()
        hidden = re.search(r'<input type="hidden" name="query" value="([^"]+)">', page)
        assert hidden, "a filtered page offers to save its query"
        response = save(client, "pushes denied", hidden.group(1).replace("&amp;", "&"))
        html = response.content.decode()
        assert "Saved the filter “pushes denied”." in html
        saved = SavedAuditFilter.objects.get(user=alice)
        assert saved.query == "q=git+push&behavior=deny"
        assert f'<a href="/audit/?{saved.query.replace("&", "&amp;")}" aria-current="page">pushes denied</a>' in html

    def test_the_same_name_replaces_and_bad_filters_are_refused(self, alice: Any) -> None:
        client = client_for(alice)
        save(client, "mine", "decided_by=alice")
        save(client, "mine", "decided_by=alice&behavior=allow")
        assert list(SavedAuditFilter.objects.values_list("name", "query")) == [
            ("mine", "behavior=allow&decided_by=alice")
        ]
        assert "the filters are not valid" in save(client, "bad", "behavior=maybe").content.decode()
        assert "Give the filter a name" in save(client, "  ", "behavior=deny").content.decode()
        assert "There is no filter to save" in save(client, "empty", "").content.decode()
        assert SavedAuditFilter.objects.count() == 1

    def test_it_keeps_each_persons_filters_their_own(self, alice: Any, mallory: Any) -> None:
        save(client_for(alice), "alice's", "behavior=deny")
        saved = SavedAuditFilter.objects.get()
        other = client_for(mallory)
        assert "alice&#x27;s" not in other.get("/audit/").content.decode()
        assert other.post(f"/audit/filters/{saved.pk}/delete/").status_code == 404
        assert client_for(alice).post(f"/audit/filters/{saved.pk}/delete/").status_code == 302
        assert SavedAuditFilter.objects.count() == 0

    def test_it_caps_how_many_a_person_keeps(self, alice: Any) -> None:
        for n in range(services.MAX_SAVED_FILTERS):
            services.audit_filter_save(user=alice, name=f"f{n}", query=f"session=s{n}")
        with pytest.raises(services.ServiceError, match="delete one first"):
            services.audit_filter_save(user=alice, name="one more", query="session=x")
