"""Applies ``migrations/NNNN_name.sql`` in order, once each, under an advisory lock.

Every replica may run ``pgbeat migrate`` at start: the lock makes the others wait, and
the record table makes them skip what the first one applied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql

from pgbeat.db import frameworks
from pgbeat.db.runner import Plan, Transactions, async_aware, run_each, run_each_async
from pgbeat.db.sql import migrations as migration_sql
from pgbeat.errors import NotMigrated

# The advisory lock's key: the first 8 bytes of "pgbeat.m" as a signed bigint, fixed forever.
MIGRATION_LOCK_KEY = int.from_bytes(b"pgbeat.m", "big", signed=True)
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    """The migrations shipped in the package, in version order."""
    found = []
    for entry in resources.files("pgbeat.db").joinpath("migrations").iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


def migration_script(schema: str | None = None) -> str:
    """All migrations as one SQL script, for teams who apply SQL with their own tool.

    With ``schema``, the script creates it when missing and installs into it (its
    ``SET search_path`` lasts for the session that runs the script).
    """
    parts = [migration_sql.MIGRATIONS_CREATE_TABLE.strip() + ";"]
    if schema is not None:
        create = migration_sql.MIGRATIONS_CREATE_SCHEMA.format(schema=sql.Identifier(schema))
        path = migration_sql.MIGRATIONS_SET_SEARCH_PATH.format(schema=sql.Identifier(schema))
        parts.insert(0, f"{create.as_string(None)};\n{path.as_string(None)};")
    for migration in available_migrations():
        parts.append(f"-- {migration.version:04d}_{migration.name}.sql\nBEGIN;")
        parts.append(migration.sql.strip())
        record = migration_sql.MIGRATIONS_RECORD_SCRIPT.format(
            version=sql.Literal(migration.version), name=sql.Literal(migration.name)
        )
        parts.append(record.as_string(None) + "\nCOMMIT;")
    return "\n\n".join(parts) + "\n"


def create_schema(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Create ``schema`` unless it exists (``pgbeat migrate --schema``); True if created.

    Replicas migrating at once take the schema's migration lock first, so one creates it
    and the others find it; a role that may not create schemas can use an existing one.
    """
    with conn.transaction():
        conn.execute(
            migration_sql.MIGRATIONS_LOCK_SCHEMA, {"schema": schema, "key": MIGRATION_LOCK_KEY}
        )
        row = conn.execute(migration_sql.MIGRATIONS_SCHEMA_EXISTS, {"schema": schema}).fetchone()
        if row and row[0]:
            return False
        conn.execute(migration_sql.MIGRATIONS_CREATE_SCHEMA.format(schema=sql.Identifier(schema)))
    return True


@async_aware("apply_migrations_async")
def apply_migrations(conn: psycopg.Connection[Any]) -> list[Migration]:
    """Apply the pending migrations, each in its own transaction; return those applied.

    Every transaction takes the advisory lock first, then reads what is applied: replicas
    migrating at once wait for each other and skip what another applied. The lock is a
    transaction's, not the session's, so migrate also works through a transaction pooler.
    In autocommit each migration commits on its own; inside the caller's transaction (as
    Django's ``migrate`` runs it) each is a savepoint and all commit with the caller. An
    async connection returns the coroutine of ``apply_migrations_async``.
    """
    return run_each(conn, _migrations())


async def apply_migrations_async(conn: object) -> list[Migration]:
    """``apply_migrations`` on an async connection (psycopg or SQLAlchemy), awaited: the same
    plan, so the same statements, transactions and lock."""
    return await run_each_async(await frameworks.async_connection(conn), _migrations())


def _migrations() -> Transactions[list[Migration]]:
    """``apply_migrations`` as transactions for the runner: what is applied, then each
    pending migration in a transaction of its own."""
    done = yield _applied_versions(create=True)
    applied = []
    for migration in available_migrations():
        if migration.version not in done and (yield _apply(migration)):
            applied.append(migration)
    return applied


def _applied_versions(*, create: bool = False) -> Plan[set[int]]:
    """Under the lock, the versions applied (the record table created first if asked)."""
    yield migration_sql.MIGRATIONS_LOCK, {"key": MIGRATION_LOCK_KEY}
    if create:
        yield migration_sql.MIGRATIONS_CREATE_TABLE, {}
    return {row[0] for row in (yield migration_sql.MIGRATIONS_APPLIED, {})}


def _apply(migration: Migration) -> Plan[bool]:
    """Apply ``migration`` under the lock unless another process just did; True if applied."""
    if migration.version in (yield from _applied_versions()):
        return False
    yield migration.sql.encode(), None  # a script: several statements, no parameters
    params = {"version": migration.version, "name": migration.name}
    yield migration_sql.MIGRATIONS_RECORD, params
    return True


def pending_migrations(conn: psycopg.Connection[Any]) -> list[Migration]:
    """Migrations this version ships that the database has not applied."""
    exists = conn.execute(migration_sql.MIGRATIONS_TABLE_EXISTS).fetchone()
    done = (
        {row[0] for row in conn.execute(migration_sql.MIGRATIONS_APPLIED)}
        if exists and exists[0]
        else set()
    )
    return [m for m in available_migrations() if m.version not in done]


def require_current_schema(conn: psycopg.Connection[Any]) -> None:
    """Raise ``NotMigrated`` unless every shipped migration has been applied."""
    missing = pending_migrations(conn)
    if missing:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in missing)
        raise NotMigrated(f"the database is missing migrations {names}: run `pgbeat migrate`")
