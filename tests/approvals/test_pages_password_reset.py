"""The one-time link's pages are Gatehouse's own: setting a password, a spent link, done.

A person invited on the people page or by `manage.py adduser` opens their one-time link,
often on a phone: the page they land on must be the dashboard's, not the Django admin's.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from approvals import services

OURS = b'<a class="skip" href="#main">Skip to content</a>'
ADMIN = b"Django administration"


def path_of(link: str) -> str:
    return "/" + link.split("://", 1)[1].split("/", 1)[1]


@pytest.fixture
def invited(default_team: Any) -> str:
    """The path of a new person's one-time link."""
    erin = get_user_model().objects.create_user("erin")
    erin.set_unusable_password()
    erin.save()
    services.membership_set(user=erin, team=default_team, role="approver")
    return path_of(services.person_login_link(user=erin))


@pytest.mark.django_db
class PasswordResetPagesTests:
    def test_it_sets_the_password_on_our_own_page(self, invited: str) -> None:
        browser = Client()
        form = browser.get(invited, follow=True)
        assert form.status_code == 200
        assert OURS in form.content and ADMIN not in form.content
        assert b"<h1>Set your password</h1>" in form.content and b"new_password1" in form.content
        done = browser.post(
            form.redirect_chain[-1][0],
            {"new_password1": "erins-new-pass-phrase", "new_password2": "erins-new-pass-phrase"},
            follow=True,
        )
        assert done.status_code == 200
        assert OURS in done.content and ADMIN not in done.content
        assert b"<h1>Password set</h1>" in done.content
        assert Client().login(username="erin", password="erins-new-pass-phrase")

    def test_it_says_what_to_do_when_the_link_is_spent(self, invited: str) -> None:
        page = Client().get(invited.replace("/accounts/reset/", "/accounts/reset/x", 1), follow=True)
        assert page.status_code == 200
        assert OURS in page.content and ADMIN not in page.content
        assert b"no longer works" in page.content and b"new_password1" not in page.content

    def test_it_refuses_mismatched_passwords_with_a_message(self, invited: str) -> None:
        browser = Client()
        form = browser.get(invited, follow=True)
        refused = browser.post(form.redirect_chain[-1][0], {"new_password1": "a-long-pass-1", "new_password2": "other"})
        assert refused.status_code == 200
        assert b'role="alert"' in refused.content and ADMIN not in refused.content


@pytest.mark.django_db
class NoMailResetTests:
    """Gatehouse sends no mail: where Django's reset-by-e-mail form was, a page says what to do."""

    @pytest.mark.parametrize("path", ["/accounts/password_reset/", "/accounts/password_reset/done/"])
    def test_it_says_how_to_get_a_one_time_link(self, path: str) -> None:
        page = Client().get(path)
        assert page.status_code == 200
        assert OURS in page.content and ADMIN not in page.content
        assert b"one-time link" in page.content and b"manage.py changepassword" in page.content

    def test_it_takes_no_address_to_mail(self, alice: Any) -> None:
        # Django's form would look the address up and call an SMTP server that is not there.
        answer = Client().post("/accounts/password_reset/", {"email": "alice@example.com"})
        assert answer.status_code == 405
