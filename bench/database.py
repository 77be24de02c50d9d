"""The one PostgreSQL server a run uses, and a fresh database on it for each system.

``DATABASE_URL`` names an administrative URL of a server on this machine; without it an
embedded server (the ``pgserver`` package) is started under ``bench/.pgserver/`` and
stops when the run ends. Only loopback addresses and Unix sockets are accepted.
"""

from __future__ import annotations

import ipaddress
import os
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

EMBEDDED_DIR = Path(__file__).resolve().parent / ".pgserver"
_servers: list[Any] = []  # keeps the embedded server alive for the whole run


def admin_url() -> str:
    """``DATABASE_URL`` if set, else the URL of an embedded server started for this run."""
    url = os.environ.get("DATABASE_URL") or embedded_url(EMBEDDED_DIR)
    require_loopback(url)
    return url


def embedded_url(directory: Path) -> str:
    """Start (or reuse) a pgserver in ``directory``; it stops when this process exits."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pgserver warns about XDG_RUNTIME_DIR
        import pgserver

        directory.mkdir(parents=True, exist_ok=True)
        server = pgserver.get_server(directory, cleanup_mode="stop")
    _servers.append(server)
    return str(server.get_uri())


def require_loopback(url: str) -> None:
    """Raise ``ValueError`` unless ``url`` reaches a server on this machine."""
    host = psycopg.conninfo.conninfo_to_dict(url).get("host")
    for name in str(host or "").split(","):
        if not name or name.startswith("/") or name == "localhost":
            continue
        try:
            if ipaddress.ip_address(name).is_loopback:
                continue
        except ValueError:
            pass
        raise ValueError(f"the benchmark runs against loopback only, not host {name!r}")


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead."""
    parts = urlsplit(url)
    if parts.scheme.startswith("postgres"):
        return urlunsplit(parts._replace(path="/" + name))
    return psycopg.conninfo.make_conninfo(url, dbname=name)


@contextmanager
def fresh_database(admin: str, system: str) -> Iterator[str]:
    """Create an empty database for ``system``, yield its URL, drop it afterwards."""
    name = f"bench_{system}_{uuid.uuid4().hex[:8]}"
    identifier = sql.Identifier(name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(identifier))
    try:
        yield with_database(admin, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(identifier))


def server_facts(admin: str) -> dict[str, str]:
    """The server's version and the settings that decide queue throughput."""
    names = ["fsync", "synchronous_commit", "shared_buffers", "autovacuum", "max_connections"]
    with psycopg.connect(admin, autocommit=True) as conn:
        version = conn.execute("SELECT version()").fetchone()
        rows = conn.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)", (names,)
        ).fetchall()
    facts = {"version": str(version[0]) if version else "?"}
    facts.update({name: value for name, value in rows})
    return facts


def vacuum_analyze(url: str) -> None:
    """VACUUM ANALYZE the whole database, so every drain starts from fresh statistics."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def truncate(url: str, *tables: str) -> None:
    """Empty ``tables`` (and what references them), restarting their identities."""
    names = sql.SQL(", ").join(sql.Identifier(t) for t in tables)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(names))


def count_rows(conn: psycopg.Connection[Any], table: str, where_status: str | None) -> int:
    """Rows of ``table`` (with ``status = where_status`` when given)."""
    query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
    if where_status is not None:
        query = query + sql.SQL(" WHERE status = {}").format(sql.Literal(where_status))
    row = conn.execute(query).fetchone()
    return int(row[0]) if row else 0
