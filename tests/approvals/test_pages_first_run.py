"""First run: the server says where it answers, how a phone reaches it, and how to reset the admin."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import override_settings


def banner(*args: str) -> str:
    out = io.StringIO()
    call_command("gatehouse_banner", *args, stdout=out)
    return out.getvalue()


class FirstRunBannerTests:
    def test_it_prints_the_url_it_serves_and_how_to_reset_the_admin_password(self) -> None:
        text = banner("--host", "127.0.0.1", "--port", "8123")
        assert "serving http://127.0.0.1:8123/" in text
        assert "manage.py changepassword admin" in text
        assert "only this machine can connect" in text and "HOST=0.0.0.0" in text

    def test_it_names_the_admin_it_made(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # The environment `make run` passes, not our code, is what changes here.
        monkeypatch.setenv("GATEHOUSE_ADMIN_USER", "root-person")
        assert "changepassword root-person" in banner()

    def test_it_tells_a_phone_which_address_to_open_or_what_blocks_it(self) -> None:
        phone_side = ("--host", "0.0.0.0", "--port", "8000", "--address", "192.168.1.20")
        with override_settings(ALLOWED_HOSTS=["127.0.0.1"]):
            blocked = banner(*phone_side)
        with override_settings(ALLOWED_HOSTS=["127.0.0.1", "192.168.1.20"]):
            allowed = banner(*phone_side)
        assert "http://192.168.1.20:8000/ would get 'DisallowedHost'" in blocked and "ALLOWED_HOSTS" in blocked
        assert "from a phone on your network: http://192.168.1.20:8000/" in allowed
        assert "DisallowedHost" not in allowed

    def test_it_lists_this_machines_private_addresses_when_it_listens_on_all(self) -> None:
        text = banner("--host", "0.0.0.0", "--port", "8000")
        assert "from a phone on your network: http://" in text or "would get 'DisallowedHost'" in text
