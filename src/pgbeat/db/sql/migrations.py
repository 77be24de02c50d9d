"""The statements of ``pgbeat_migrations``: which migrations are applied, their record,
and the lock that serialises ``pgbeat migrate``."""

from __future__ import annotations

from typing import LiteralString

from psycopg import sql

# Serialises `pgbeat migrate` across processes until the end of the transaction (a
# transaction-level advisory lock: safe behind a transaction pooler, never left held). The
# key is the schema's, as pgbeat_lock_key (migrations/0020) gives it, written out: that
# function does not exist before the first migration.
MIGRATIONS_LOCK: LiteralString = """
SELECT pg_advisory_xact_lock(CASE WHEN current_schema() = 'public' THEN %(key)s
                                  ELSE hashtextextended(current_schema(), %(key)s) END)"""

# Serialises the creation of schema %(schema)s (`pgbeat migrate --schema`), with the key
# that MIGRATIONS_LOCK takes in it.
MIGRATIONS_LOCK_SCHEMA: LiteralString = """
SELECT pg_advisory_xact_lock(CASE WHEN %(schema)s = 'public' THEN %(key)s
                                  ELSE hashtextextended(%(schema)s, %(key)s) END)"""

# Whether schema %(schema)s exists (`pgbeat migrate --schema` creates it when missing; a
# session whose current_schema() is NULL may name one it has no right to use).
MIGRATIONS_SCHEMA_EXISTS: LiteralString = """
SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = %(schema)s)"""

# Creates pgbeat's schema (`pgbeat migrate --schema NAME`; the name is an identifier).
MIGRATIONS_CREATE_SCHEMA = sql.SQL("CREATE SCHEMA IF NOT EXISTS {schema}")

# `pgbeat migrate --print --schema NAME`: what follows in the script installs into NAME.
MIGRATIONS_SET_SEARCH_PATH = sql.SQL("SET search_path TO {schema}")

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
