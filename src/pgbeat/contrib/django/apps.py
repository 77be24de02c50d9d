"""The Django app: pgbeat's schema follows ``manage.py migrate``."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate


class PgbeatConfig(AppConfig):  # type: ignore[misc]  # Django ships no type hints
    name = "pgbeat.contrib.django"
    label = "pgbeat"
    verbose_name = "pgbeat"

    def ready(self) -> None:
        post_migrate.connect(apply_schema, sender=self)


def apply_schema(using: str = "default", verbosity: int = 1, **_: Any) -> None:
    """Apply pgbeat's pending migrations to the database ``manage.py migrate`` just migrated.

    A ``post_migrate`` handler rather than Django migrations: pgbeat's own migrations stay
    the single record of its schema (``pgbeat_migrations``), and upgrading pgbeat needs no
    new Django migration, only the next ``manage.py migrate``.
    """
    from pgbeat import apply_migrations
    from pgbeat.db.frameworks import sync_connection

    connection = connections[using]
    if connection.vendor != "postgresql":
        return
    conn = sync_connection(connection)
    assert conn is not None
    for migration in apply_migrations(conn):
        if verbosity >= 1:
            print(f"  Applying pgbeat {migration.version:04d}_{migration.name}... OK")
