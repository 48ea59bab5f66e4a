"""`manage.py gatehouse_banner`: say at start-up where the server answers and what it runs on.

`make run` prints this before Daphne starts: the URL to open, the addresses a phone on
the same network would use (and whether `ALLOWED_HOSTS` lets them in), how to reset the
admin's password, and which database, claim store and channel layer the server uses.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

ANY_ADDRESS = {"0.0.0.0", "::", ""}  # noqa: S104 - recognising it, not binding


def lan_addresses() -> list[str]:
    """This machine's private IPv4 addresses, from its own host name (no traffic is sent)."""
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, family=socket.AF_INET)
    except OSError:
        return []
    found = {str(info[4][0]) for info in infos}
    return sorted(a for a in found if ipaddress.ip_address(a).is_private and not ipaddress.ip_address(a).is_loopback)


def host_allowed(host: str) -> bool:
    """Whether Django's ALLOWED_HOSTS lets a request for `host` in (same matching as Django)."""
    from django.http.request import validate_host

    return validate_host(host, settings.ALLOWED_HOSTS)


class Command(BaseCommand):
    help = "Print the URL the server serves, how to reach it from a phone, and its backends."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"), help="the address Daphne binds")
        parser.add_argument("--port", default=os.environ.get("PORT", "8000"), help="the port Daphne binds")
        parser.add_argument(
            "--address",
            action="append",
            default=None,
            help="an address a phone reaches this machine at (default: its private addresses); repeatable",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = str(options["host"]), str(options["port"])
        shown = "127.0.0.1" if host in ANY_ADDRESS else host
        self.stdout.write(f"Gatehouse: serving http://{shown}:{port}/ (log in at /accounts/login/)")
        self._phone(host, port, options["address"] or lan_addresses())
        admin = os.environ.get("GATEHOUSE_ADMIN_USER", "admin")
        self.stdout.write(f"Gatehouse: forgot the admin password? .venv/bin/python manage.py changepassword {admin}")
        self._backends()

    def _phone(self, host: str, port: str, addresses: list[str]) -> None:
        if host not in ANY_ADDRESS:
            if ipaddress.ip_address(host).is_loopback if _is_ip(host) else host == "localhost":
                self.stdout.write(
                    "Gatehouse: only this machine can connect; to use a phone on your network, "
                    "run HOST=0.0.0.0 ALLOWED_HOSTS=<this machine's address> make run (docs/DASHBOARD.md)"
                )
            return
        if not addresses:
            self.stdout.write(
                f"Gatehouse: from a phone on your network: http://<this machine's address>:{port}/ "
                "(add that address to ALLOWED_HOSTS)"
            )
        for address in addresses:
            if host_allowed(address):
                self.stdout.write(f"Gatehouse: from a phone on your network: http://{address}:{port}/")
            else:
                self.stdout.write(
                    f"Gatehouse: a phone at http://{address}:{port}/ would get 'DisallowedHost' (400): "
                    f"add {address} to ALLOWED_HOSTS"
                )

    def _backends(self) -> None:
        engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        self.stdout.write(f"Gatehouse: database {engine}")
        if settings.REDIS_URL:
            self.stdout.write("Gatehouse: Redis claim store and channel layer (several processes may share them)")
        else:
            self.stdout.write(
                "Gatehouse: embedded claim store and in-memory channel layer: single process only; "
                "set REDIS_URL to run several."
            )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
