"""The statements of ``pgbeat_migrations``: which migrations are applied, their record,
and the lock that serialises ``pgbeat migrate``."""

from __future__ import annotations

from typing import LiteralString

from psycopg import sql

# Serialises `pgbeat migrate` across processes until the end of the transaction (a
# transaction-level advisory lock: safe behind a transaction pooler, never left held).
MIGRATIONS_LOCK: LiteralString = "SELECT pg_advisory_xact_lock(%(key)s)"

# Where applied migrations are recorded.
MIGRATIONS_CREATE_TABLE: LiteralString = """
CREATE TABLE IF NOT EXISTS pgbeat_migrations (
    version    int PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""

# Versions already applied (primary key).
MIGRATIONS_APPLIED: LiteralString = "SELECT version FROM pgbeat_migrations ORDER BY version"

# Whether pgbeat_migrations exists yet (before the first migrate it does not).
MIGRATIONS_TABLE_EXISTS: LiteralString = "SELECT to_regclass('pgbeat_migrations') IS NOT NULL"

# Records one applied migration, in the migration's own transaction.
MIGRATIONS_RECORD: LiteralString = (
    "INSERT INTO pgbeat_migrations (version, name) VALUES (%(version)s, %(name)s)"
)

# The same record in `pgbeat migrate --print`'s script, where values are literals.
MIGRATIONS_RECORD_SCRIPT = sql.SQL(
    "INSERT INTO pgbeat_migrations (version, name) VALUES ({version}, {name}) "
    "ON CONFLICT DO NOTHING;"
)
