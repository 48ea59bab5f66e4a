from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        connection_created.connect(_sqlite_functions, dispatch_uid="approvals.sqlite_functions")


def _sqlite_functions(sender: Any, connection: Any, **kwargs: Any) -> None:
    """SQLite's copy of the database functions PostgreSQL gets in migrations (0025: the chain's hash)."""
    if connection.vendor == "sqlite":
        from approvals.audit import chain_hash

        connection.connection.create_function("gatehouse_chain_hash", 2, chain_hash, deterministic=True)
