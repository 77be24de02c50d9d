"""A schema behind pgbouncer in transaction mode: pgbouncer refuses the startup option that
--schema sends elsewhere, so the role carries the schema (ALTER ROLE ... SET search_path),
and --schema checks that it does."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pgbeat.db.schemas import with_schema
from tests.apps.steer_app import SETUP
from tests.helpers import run_cli, run_cli_here, start_cli, wait_for
from tests.pgbouncer import Pgbouncer

ROOT = str(Path(__file__).resolve().parents[2])
POOLED = {"PGBEAT_POOLER": "transaction"}


@pytest.fixture
def app_role(bouncer: Pgbouncer, database_url: str) -> Iterator[str]:
    """A login whose sessions in this database start in schema app_a (migrated), known to
    pgbouncer: the URL through pgbouncer logging in as it."""
    done = run_cli_here(["migrate", "--schema", "app_a"], database_url)
    assert done.returncode == 0, done.stderr
    role = f"app_a_{uuid.uuid4().hex[:8]}"
    dbname = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN SUPERUSER").format(sql.Identifier(role)))
        admin.execute(
            sql.SQL("ALTER ROLE {} IN DATABASE {} SET search_path = app_a").format(
                sql.Identifier(role), sql.Identifier(str(dbname))
            )
        )
    with (bouncer.directory / "users.txt").open("a") as users:
        users.write(f'"{role}" ""\n')
    with bouncer.console() as console:
        console.execute("RELOAD")
    through = bouncer.url(database_url)
    yield psycopg.conninfo.make_conninfo(through, user=role)
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_pgbouncer_refuses_the_startup_option(bouncer: Pgbouncer, database_url: str) -> None:
    """Why --schema cannot set search_path there (what docs/schemas.md says)."""
    with pytest.raises(psycopg.OperationalError, match="options"):
        psycopg.connect(with_schema(bouncer.url(database_url), "app_a"), prepare_threshold=None)


@pytest.mark.slow
def test_behind_pgbouncer_the_roles_search_path_serves_the_schema(
    bouncer: Pgbouncer, database_url: str, app_role: str
) -> None:
    app_a = with_schema(database_url, "app_a")
    with psycopg.connect(app_a, autocommit=True) as conn:
        conn.execute(SETUP.encode())
    enqueued = run_cli(
        ["enqueue", "sleepy", "--schema", "app_a"], app_role, PGBEAT_POOLER="transaction"
    )
    assert enqueued.returncode == 0, enqueued.stderr
    worker = start_cli(
        ["worker", "tests.apps.steer_app:registry", "--schema", "app_a"],
        app_role,
        cwd=ROOT,
        **POOLED,
    )
    try:
        with psycopg.connect(app_a, autocommit=True) as conn:
            wait_for(
                lambda: _status(conn) == "done",
                timeout=60,
                message="the job done through pgbouncer",
            )
            assert conn.execute("SELECT count(*) FROM executions").fetchone() == (1,)
    finally:
        worker.stop(signal.SIGTERM)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)  # public's


def _status(conn: psycopg.Connection[Any]) -> str | None:
    row = conn.execute("SELECT status FROM jobs").fetchone()
    return str(row[0]) if row else None


def test_behind_pgbouncer_a_role_without_the_schema_is_refused_in_one_line(
    bouncer: Pgbouncer, database_url: str
) -> None:
    migrated = run_cli_here(["migrate", "--schema", "app_a"], database_url)
    assert migrated.returncode == 0, migrated.stderr
    for args in (["jobs", "list"], ["enqueue", "k"], ["queues", "list"]):
        done = run_cli_here(
            [*args, "--schema", "app_a"], bouncer.url(database_url), PGBEAT_POOLER="transaction"
        )
        assert done.returncode == 1
        assert done.stderr.count("\n") == 1, done.stderr
        assert "ALTER ROLE <role> SET search_path = app_a" in done.stderr
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
