"""Test fixtures: a real PostgreSQL for every test that touches the database.

``DATABASE_URL`` names a server to use (tests create and drop their own databases on it);
without it, an embedded server (pgserver) is started for the session. Every test gets a
fresh database cloned from a migrated template, so tests never see each other's rows.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from pgbeat.db.migrate import apply_migrations


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead."""
    parts = urlsplit(url)
    if parts.scheme.startswith("postgres"):
        return urlunsplit(parts._replace(path="/" + name))
    return psycopg.conninfo.make_conninfo(url, dbname=name)


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """An administrative URL of the PostgreSQL server the tests run against."""
    from_env = os.environ.get("DATABASE_URL")
    if from_env:
        yield from_env
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        directory = Path(tempfile.mkdtemp(prefix="pgbeat-test-pg-"))
        server = pgserver.get_server(directory, cleanup_mode="stop")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def template_name(server_url: str) -> Iterator[str]:
    """A migrated database that each test's database is cloned from."""
    name = f"pgbeat_tpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(with_database(server_url, name), autocommit=True) as conn:
        apply_migrations(conn)
    yield name
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _temporary_database(server_url: str, template: str | None) -> Iterator[str]:
    """Create a database (cloned from ``template`` if given), yield its URL, drop it."""
    name = f"pgbeat_t_{uuid.uuid4().hex[:12]}"
    clone = sql.SQL(" TEMPLATE {}").format(sql.Identifier(template)) if template else sql.SQL("")
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}{}").format(sql.Identifier(name), clone))
    yield with_database(server_url, name)
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture
def database_url(server_url: str, template_name: str) -> Iterator[str]:
    """A URL of a fresh, migrated database of this test's own, dropped afterwards."""
    yield from _temporary_database(server_url, template_name)


@pytest.fixture
def empty_database_url(server_url: str) -> Iterator[str]:
    """A URL of a fresh database with no schema at all (for migration tests)."""
    yield from _temporary_database(server_url, None)


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """An autocommit connection to the test's database."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection
