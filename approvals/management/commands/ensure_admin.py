"""`manage.py ensure_admin`: make sure an admin exists and the default team is set up.

The password comes from GATEHOUSE_ADMIN_PASSWORD; without it a random one is generated
and printed once, when the admin is first created.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from approvals import services
from approvals.models import Role


class Command(BaseCommand):
    help = "Create the admin user (GATEHOUSE_ADMIN_USER, default 'admin') if it does not exist."

    def handle(self, *args: Any, **options: Any) -> None:
        team = services.default_team()
        username = os.environ.get("GATEHOUSE_ADMIN_USER", "admin")
        users = get_user_model().objects
        admin = users.filter(username=username).first()
        if admin is None:
            password = os.environ.get("GATEHOUSE_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
            admin = users.create_superuser(username=username, email="", password=password)
            if os.environ.get("GATEHOUSE_ADMIN_PASSWORD"):
                self.stdout.write(f"Created admin user {username!r} (password from GATEHOUSE_ADMIN_PASSWORD)")
            else:
                # Printed once, here; it is stored only as a hash.
                self.stdout.write(f"Created admin user {username!r} with password: {password}")
        services.membership_set(user=admin, team=team, role=Role.ADMIN)
