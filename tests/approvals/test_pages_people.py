"""People without the Django admin: `manage.py adduser`, the one-time link, and the people page."""

from __future__ import annotations

import html
import io
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from approvals import permissions
from approvals.models import Membership


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def adduser(*args: str, stdin: str | None = None, monkeypatch: pytest.MonkeyPatch | None = None) -> str:
    if stdin is not None and monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    out = io.StringIO()
    call_command("adduser", *args, stdout=out)
    return out.getvalue()


def set_password_through(link: str, password: str) -> Client:
    """Follow a one-time link as the person's browser does and set a password there."""
    browser = Client()
    path = link.split("://", 1)[1].split("/", 1)[1]
    form_page = browser.get("/" + path, follow=True)
    assert form_page.status_code == 200 and b"new_password1" in form_page.content
    done = browser.post(
        form_page.redirect_chain[-1][0],
        {"new_password1": password, "new_password2": password},
    )
    assert done.status_code == 302, done.content[:400]
    return browser


@pytest.mark.django_db
class AddUserCommandTests:
    def test_it_adds_a_person_with_a_password_from_stdin(
        self, default_team: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        out = adduser(
            "dave",
            "--team",
            "default",
            "--role",
            "admin",
            "--password-stdin",
            stdin="a-long-pass-phrase-9\n",
            monkeypatch=monkeypatch,
        )
        assert out.strip() == "dave is admin in team 'default'."
        dave = get_user_model().objects.get(username="dave")
        assert dave.check_password("a-long-pass-phrase-9")
        assert permissions.is_team_admin(dave, default_team.pk)
        assert Client().login(username="dave", password="a-long-pass-phrase-9")

    def test_it_prints_a_one_time_link_that_works_once(self, default_team: Any) -> None:
        out = adduser("erin", "--team", "default", "--role", "approver")
        link = out.strip().splitlines()[-1]
        assert link.startswith("http://") and "/accounts/reset/" in link
        erin = get_user_model().objects.get(username="erin")
        assert not erin.has_usable_password() and Membership.objects.get(user=erin).role == "approver"
        set_password_through(link, "erins-new-pass-phrase")
        assert Client().login(username="erin", password="erins-new-pass-phrase")
        # Spent: the same link no longer opens the form.
        again = Client().get("/" + link.split("://", 1)[1].split("/", 1)[1], follow=True)
        assert b"new_password1" not in again.content

    @pytest.mark.parametrize(
        ("args", "stdin", "message"),
        [
            (("x", "--team", "nope"), None, "no team named 'nope'"),
            (("alice", "--team", "default"), None, "already in team 'default'"),
            (("frank", "--team", "default", "--password-stdin"), "short\n", "too short"),
            (("frank", "--team", "default", "--password-stdin"), "", "held no password"),
            (("bad name!", "--team", "default"), None, "not a valid user name"),
        ],
    )
    def test_it_refuses_bad_input_with_a_clear_error(
        self, alice: Any, args: tuple[str, ...], stdin: str | None, message: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with pytest.raises(CommandError, match=message):
            adduser(*args, stdin=stdin, monkeypatch=monkeypatch)
        assert not get_user_model().objects.filter(username__in=["x", "frank", "bad name!"]).exists()

    def test_it_refuses_an_unknown_role(self, default_team: Any) -> None:
        with pytest.raises(CommandError, match="invalid choice: 'owner'"):
            adduser("gina", "--role", "owner")


@pytest.mark.django_db
class PeoplePageTests:
    def test_it_lets_a_team_admin_invite_with_a_link_shown_once(self, carol: Any, default_team: Any) -> None:
        client = client_for(carol)
        response = client.post("/people/", {"username": "hana", "role": "viewer", "team": default_team.pk})
        assert response.status_code == 200 and response["Cache-Control"] == "no-store"
        link = re.search(r'<code id="invite-link">([^<]+)</code>', response.content.decode())
        assert link is not None
        assert link.group(1) not in client.get("/people/").content.decode()
        set_password_through(link.group(1), "hanas-pass-phrase-1")
        hana = get_user_model().objects.get(username="hana")
        assert permissions.role_in(hana, default_team.pk) == "viewer"

    def test_it_adds_an_existing_person_without_a_link(self, carol: Any, mallory: Any, default_team: Any) -> None:
        response = client_for(carol).post(
            "/people/", {"username": "mallory", "role": "viewer", "team": default_team.pk}
        )
        assert response.status_code == 200
        assert 'id="invite-link"' not in response.content.decode()
        assert permissions.role_in(mallory, default_team.pk) == "viewer"

    def test_it_changes_a_role_and_removes_a_person(self, carol: Any, alice: Any, bob: Any, default_team: Any) -> None:
        client = client_for(carol)
        assert client.post(f"/people/default/{bob.pk}/role/", {"role": "approver"}).status_code == 302
        assert permissions.role_in(bob, default_team.pk) == "approver"
        assert client.post(f"/people/default/{alice.pk}/remove/").status_code == 302
        alice.refresh_from_db()
        # Alice was in no other team: she can no longer log in at all.
        assert permissions.role_in(alice, default_team.pk) is None and not alice.is_active
        assert not Client().login(username="alice", password="alice-password-1")

    def test_it_keeps_someone_in_other_teams_active_when_removed_from_one(
        self, carol: Any, mallory: Any, default_team: Any, other_team: Any
    ) -> None:
        client = client_for(carol)
        client.post("/people/", {"username": "mallory", "role": "viewer", "team": default_team.pk})
        assert client.post(f"/people/default/{mallory.pk}/remove/").status_code == 302
        mallory.refresh_from_db()
        assert mallory.is_active and permissions.role_in(mallory, other_team.pk) == "approver"
        assert not permissions.can_see(mallory, default_team.pk)

    def test_it_refuses_a_bad_role_with_a_message(self, carol: Any, bob: Any, default_team: Any) -> None:
        client = client_for(carol)
        response = client.post(f"/people/default/{bob.pk}/role/", {"role": "owner"}, follow=True)
        assert "unknown role 'owner'" in html.unescape(response.content.decode())
        assert permissions.role_in(bob, default_team.pk) == "viewer"

    def test_it_does_not_let_an_admin_change_themselves_or_a_superuser(
        self, carol: Any, admin: Any, default_team: Any
    ) -> None:
        from approvals import services

        services.membership_set(user=admin, team=default_team, role="admin")
        client = client_for(carol)
        assert client.post(f"/people/default/{carol.pk}/role/", {"role": "viewer"}).status_code == 403
        assert client.post(f"/people/default/{carol.pk}/remove/").status_code == 403
        assert client.post(f"/people/default/{admin.pk}/remove/").status_code == 403
        assert permissions.role_in(carol, default_team.pk) == "admin"

    def test_it_shows_the_people_link_only_to_team_admins(self, carol: Any, alice: Any) -> None:
        assert 'href="/people/"' in client_for(carol).get("/").content.decode()
        assert 'href="/people/"' not in client_for(alice).get("/").content.decode()
        assert client_for(alice).get("/people/").status_code == 403
