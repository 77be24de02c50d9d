"""Several apps in one database: which schema pgbeat's tables live in (``--schema`` or
``PGBEAT_SCHEMA``), and a connection URL that puts it first on ``search_path``.

Everything else follows from the session's schema, inside the database: tables, functions
and triggers resolve through ``search_path``; NOTIFY channels and advisory lock keys are
derived from ``current_schema()`` by ``pgbeat_channel`` and ``pgbeat_lock_key``
(migrations/0020), which leave ``public``'s as they always were. Behind a transaction
pooler no startup option reaches the server, so the role must carry the setting
(``ALTER ROLE ... SET search_path``); ``require_schema`` checks that it does.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Any

import psycopg

from pgbeat.db.sql import migrations as migration_sql
from pgbeat.db.sql import session as session_sql
from pgbeat.errors import UserError

SCHEMA_ENV = "PGBEAT_SCHEMA"
DEFAULT_SCHEMA = "public"

# Unquoted PostgreSQL identifiers only (lower case, digits, "_"; at most 63 bytes): the
# name then reads the same in search_path, in SQL and in a shell, and needs no quoting.
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_SEARCH_PATH_OPTION = re.compile(r"(?:-c\s*|--)search_path=\S*")


def check_schema_name(name: str) -> str:
    """``name`` if pgbeat can use it as a schema; else ``UserError`` in one line."""
    if not _NAME.fullmatch(name):
        raise UserError(
            f"schema {name!r}: use lower-case letters, digits and '_' (at most 63, not "
            "starting with a digit)"
        )
    if name.startswith("pg_"):
        raise UserError(f"schema {name!r}: names starting with pg_ are PostgreSQL's own")
    return name


def configured_schema() -> str | None:
    """The schema named by ``--schema`` or ``PGBEAT_SCHEMA`` (checked), or None."""
    value = os.environ.get(SCHEMA_ENV, "").strip()
    return check_schema_name(value) if value else None


@contextlib.contextmanager
def named(schema: str | None) -> Iterator[None]:
    """Within the block, ``schema`` (when given) is the configured one: ``--schema`` sets
    ``PGBEAT_SCHEMA`` for this process and the processes it starts, then restores it."""
    if schema is None:
        yield
        return
    before = os.environ.get(SCHEMA_ENV)
    os.environ[SCHEMA_ENV] = schema
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SCHEMA_ENV, None)
        else:
            os.environ[SCHEMA_ENV] = before


def with_schema(url: str, schema: str | None = None) -> str:
    """``url`` whose sessions start with ``schema`` (default: the configured one) on
    ``search_path``, the URL's own other startup options kept; unchanged without a schema.

    Not for a URL through a transaction pooler, which refuses startup options: there the
    role's ``search_path`` must name the schema (``require_schema`` checks).
    """
    schema = schema or configured_schema()
    if schema is None:
        return url
    params = psycopg.conninfo.conninfo_to_dict(url)
    theirs = _SEARCH_PATH_OPTION.sub("", str(params.get("options") or "")).strip()
    options = f"{theirs} -c search_path={schema}".strip()
    return psycopg.conninfo.make_conninfo(url, options=options)


def current_schema(conn: psycopg.Connection[Any]) -> str | None:
    """The schema this session's unqualified names are created in (None: no schema)."""
    row = conn.execute(session_sql.SESSION_SCHEMA).fetchone()
    return row[0] if row else None


def require_schema(conn: psycopg.Connection[Any]) -> None:
    """Refuse, in one line, a session whose schema is not the configured one."""
    wanted = configured_schema()
    if wanted is None:
        return
    found = current_schema(conn)
    if found == wanted:
        return
    if found is None:  # current_schema() skips a schema the role may not use
        row = conn.execute(migration_sql.MIGRATIONS_SCHEMA_EXISTS, {"schema": wanted}).fetchone()
        if row and row[0]:
            raise UserError(f"permission denied for schema {wanted!r} (no USAGE right on it)")
        raise UserError(f"schema {wanted!r} does not exist: run `pgbeat migrate --schema {wanted}`")
    raise UserError(
        f"the session's schema is {found!r}, not {wanted!r} (behind a transaction pooler, "
        f"give the role its schema: ALTER ROLE <role> SET search_path = {wanted})"
    )
